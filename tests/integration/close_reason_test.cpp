// Every connection ends with one close reason, counted per reason (EngineStats
// closed_*): each case below makes one happen over real sockets and checks that its
// counter, and only its counter, moved.
#include "tests/support/blackhole.hpp"
#include "tests/support/echo_server.hpp"
#include "tests/support/exchange.hpp"
#include "tests/support/proc_stats.hpp"
#include "tests/support/proxy_under_test.hpp"
#include "tests/support/scripted_peer.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/transfer_checks.hpp"

#include <gtest/gtest.h>

#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <set>
#include <string>
#include <vector>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kMiB = 1024 * 1024;

// Waits until `reason` was counted `n` times, then checks no other reason was counted.
::testing::AssertionResult closed_only_by(ProxyUnderTest& proxy, CloseReason reason, uint64_t n) {
    if (!eventually([&] { return proxy.stats().closed(reason) >= n; }, Deadline{5s}))
        return ::testing::AssertionFailure() << "closed_" << to_string(reason) << " never reached "
                                             << n << ": " << proxy.stats().to_line();
    const EngineStats s = proxy.stats();
    uint64_t all = 0;
    for (std::size_t i = 0; i < kCloseReasonCount; ++i)
        all += s.closed(static_cast<CloseReason>(i));
    if (all != s.closed(reason))
        return ::testing::AssertionFailure() << "other reasons were counted too: " << s.to_line();
    return ::testing::AssertionSuccess();
}

TEST(CloseReason, EveryReasonHasItsOwnName) {
    std::set<std::string> names;
    for (std::size_t i = 0; i < kCloseReasonCount; ++i)
        names.insert(std::string(to_string(static_cast<CloseReason>(i))));
    EXPECT_EQ(names.size(), kCloseReasonCount);
    EXPECT_FALSE(names.contains("?"));
}

TEST(CloseReason, BothSidesEndingIsClean) {
    EchoServer echo;
    ProxyUnderTest proxy{echo.endpoint()};
    for (int i = 0; i < 3; ++i) {
        UniqueFd client = connect_to(proxy.endpoint());
        ExchangePlan plan;
        plan.send_bytes = 64 * 1024;
        plan.send_seed = 7;
        const ExchangeResult r = exchange(client, plan, Deadline{10s});
        ASSERT_TRUE(ReceivedPayload(r, 7, 64 * 1024)) << r.describe();
    }
    EXPECT_TRUE(closed_only_by(proxy, CloseReason::Clean, 3));
}

TEST(CloseReason, RefusedUpstream) {
    const ReservedPort nobody = reserve_refusing_port();
    ProxyUnderTest proxy{nobody.endpoint};
    UniqueFd client;
    if (try_connect(proxy.endpoint(), 5000ms, client) == 0)
        recv_until_eof(client.get(), Deadline{5s});
    EXPECT_TRUE(closed_only_by(proxy, CloseReason::Refused, 1));
}

TEST(CloseReason, UpstreamThatNeverAnswersTimesOut) {
    const Blackhole hole;
    ProxyUnderTest proxy{hole.endpoint(), [&](EngineConfig& c) { c.connect_timeout = 300ms; }};
    UniqueFd client;
    if (try_connect(proxy.endpoint(), 5000ms, client) == 0) {
        const IoResult r = recv_until_eof(client.get(), Deadline{5s});
        EXPECT_TRUE(r.ended_by_peer()) << to_string(r.status);
    }
    EXPECT_TRUE(closed_only_by(proxy, CloseReason::ConnectTimeout, 1));
    EXPECT_GE(proxy.stats().upstream_failures, 1u);
}

TEST(CloseReason, UpstreamResetIsTheUpstreams) {
    ExchangePlan resetter = source_plan(64 * kMiB, 61);
    resetter.abort_after_sent = kMiB;
    ScriptedPeer peer{resetter};
    ProxyUnderTest proxy{peer.endpoint()};
    UniqueFd client;
    // The whole exchange (1 MiB, the upstream's reset passed on) can be over before the
    // client's connect() has returned: it then reports the reset (ECONNRESET).
    const int err = try_connect(proxy.endpoint(), 5000ms, client);
    if (err != ECONNRESET) {
        ASSERT_EQ(err, 0) << std::strerror(err);
        const ExchangeResult mine = exchange(client, sink_plan(), Deadline{10s});
        EXPECT_TRUE(EndedByPeer(mine)) << mine.describe();
    }
    EXPECT_TRUE(closed_only_by(proxy, CloseReason::UpstreamReset, 1));
}

TEST(CloseReason, ClientResetIsTheClients) {
    ScriptedPeer peer{sink_plan()};
    ProxyUnderTest proxy{peer.endpoint()};
    UniqueFd client = connect_to(proxy.endpoint());
    ExchangePlan aborter;
    aborter.send_bytes = 64 * kMiB;
    aborter.send_seed = 71;
    aborter.abort_after_sent = kMiB;
    const ExchangeResult mine = exchange(client, aborter, Deadline{10s});
    ASSERT_TRUE(mine.aborted) << mine.describe();
    EXPECT_TRUE(closed_only_by(proxy, CloseReason::ClientReset, 1));
}

TEST(CloseReason, StopWithoutDrainResetsAsStopped) {
    EchoServer echo;
    ProxyUnderTest proxy{echo.endpoint()};
    UniqueFd client = connect_to(proxy.endpoint());
    ASSERT_TRUE(eventually([&] { return proxy.stats().active == 1; }, Deadline{5s}));
    proxy.engine().stop(0ms);
    proxy.engine().wait();
    EXPECT_TRUE(closed_only_by(proxy, CloseReason::Stopped, 1));
}

TEST(CloseReason, DrainRunningOutIsDrainTimeout) {
    EchoServer echo;
    ProxyUnderTest proxy{echo.endpoint()};
    UniqueFd client = connect_to(proxy.endpoint()); // idle: never finishes by itself
    ASSERT_TRUE(eventually([&] { return proxy.stats().active == 1; }, Deadline{5s}));
    proxy.engine().stop(100ms);
    proxy.engine().wait();
    EXPECT_TRUE(closed_only_by(proxy, CloseReason::DrainTimeout, 1));
    const IoResult r = recv_until_eof(client.get(), Deadline{5s});
    EXPECT_EQ(r.status, IoStatus::Reset) << to_string(r.status);
}

} // namespace
} // namespace uringfwd::test
