// When one side fails (upstream refuses, resets, or the client aborts), the other side
// learns about it within seconds, nothing already delivered is corrupted, and the
// engine keeps serving new connections.
#include "tests/support/exchange.hpp"
#include "tests/support/proxy_under_test.hpp"
#include "tests/support/scripted_peer.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/transfer_checks.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;
using std::chrono::duration_cast;

constexpr uint64_t kMiB = 1024 * 1024;

// A plain 1 MiB round trip through `proxy` to a sink: "the engine still works".
void expect_serves(ProxyUnderTest& proxy, ScriptedPeer& sink, std::size_t nth_result) {
    UniqueFd client = connect_to(proxy.endpoint());
    ExchangePlan plan;
    plan.send_bytes = kMiB;
    plan.send_seed = 99;
    const ExchangeResult mine = exchange(client, plan, Deadline{10s});
    EXPECT_TRUE(SentAll(mine, kMiB));
    EXPECT_EQ(mine.recv_status, IoStatus::Eof) << mine.describe();
    const auto results = sink.wait_results(nth_result + 1, Deadline{10s});
    ASSERT_GT(results.size(), nth_result) << "the follow-up connection never finished";
    EXPECT_TRUE(ReceivedPayload(results[nth_result], 99, kMiB));
}

TEST(Failure, UpstreamRefusedEndsClientWithin5s) {
    const ReservedPort nobody = reserve_refusing_port();
    ProxyUnderTest refused{nobody.endpoint};

    for (int attempt = 0; attempt < 2; ++attempt) {
        UniqueFd client;
        const int err = try_connect(refused.endpoint(), 5000ms, client);
        if (err == ECONNRESET) {
            continue; // reset before the handshake was even reported: seen at once
        }
        ASSERT_EQ(err, 0) << "connect: " << std::strerror(err);
        const auto start = Clock::now();
        const IoResult r = recv_until_eof(client.get(), Deadline{5s});
        EXPECT_TRUE(r.ended_by_peer())
            << "attempt " << attempt << ": " << to_string(r.status) << " after "
            << duration_cast<milliseconds>(Clock::now() - start).count() << " ms";
        EXPECT_EQ(r.bytes, 0u);
    }
    EXPECT_GE(refused.stats().upstream_failures, 2u);

    // A second engine with a working upstream is unaffected.
    ScriptedPeer sink{sink_plan()};
    ProxyUnderTest good{sink.endpoint()};
    expect_serves(good, sink, 0);
}

TEST(Failure, UpstreamResetMidTransferEndsClientWithin5s) {
    // First connection: send 1 MiB of a 64 MiB stream, then RST. Later ones: a sink.
    ExchangePlan resetter;
    resetter.send_bytes = 64 * kMiB;
    resetter.send_seed = 61;
    resetter.abort_after_sent = kMiB;
    ScriptedPeer peer{{resetter, sink_plan()}};
    ProxyUnderTest proxy{peer.endpoint()};

    UniqueFd client;
    // The upstream's 1 MiB and reset can reach the client before its connect() has
    // returned, which then reports the reset (ECONNRESET): ended by the peer too.
    const int err = try_connect(proxy.endpoint(), 5000ms, client);
    if (err != ECONNRESET) {
        ASSERT_EQ(err, 0) << std::strerror(err);
        ExchangePlan busy; // keeps sending so the proxy has work in both directions
        busy.send_bytes = 64 * kMiB;
        busy.send_seed = 62;
        const ExchangeResult mine = exchange(client, busy, Deadline{5s});
        EXPECT_TRUE(EndedByPeer(mine));
        EXPECT_LE(mine.received, kMiB);
        EXPECT_TRUE(ReceivedPrefixOf(mine, 61));
        client.reset();
    }

    expect_serves(proxy, peer, 1);
}

TEST(Failure, ClientAbortWhileSendingEndsUpstreamWithin5s) {
    ScriptedPeer peer{sink_plan()};
    ProxyUnderTest proxy{peer.endpoint()};

    UniqueFd client = connect_to(proxy.endpoint());
    ExchangePlan aborter;
    aborter.send_bytes = 64 * kMiB;
    aborter.send_seed = 71;
    aborter.abort_after_sent = kMiB;
    const ExchangeResult mine = exchange(client, aborter, Deadline{10s});
    ASSERT_TRUE(mine.aborted) << mine.describe();

    const auto theirs = peer.wait_result(Deadline{5s});
    ASSERT_TRUE(theirs.has_value()) << "the upstream did not notice the abort within 5 s";
    EXPECT_TRUE(theirs->recv_status == IoStatus::Eof || theirs->recv_status == IoStatus::Reset)
        << theirs->describe();
    EXPECT_LE(theirs->received, kMiB);
    EXPECT_TRUE(ReceivedPrefixOf(*theirs, 71));

    expect_serves(proxy, peer, 1);
}

TEST(Failure, ClientAbortWhileReceivingEndsUpstreamWithin5s) {
    // First connection: a 256 MiB source that will never finish; then a sink.
    ScriptedPeer peer{{source_plan(256 * kMiB, 81), sink_plan()}};
    ProxyUnderTest proxy{peer.endpoint()};

    UniqueFd client = connect_to(proxy.endpoint());
    ExchangePlan aborter = sink_plan();
    aborter.abort_after_received = kMiB;
    const ExchangeResult mine = exchange(client, aborter, Deadline{10s});
    ASSERT_TRUE(mine.aborted) << mine.describe();
    EXPECT_TRUE(ReceivedPrefixOf(mine, 81));

    const auto theirs = peer.wait_result(Deadline{5s});
    ASSERT_TRUE(theirs.has_value()) << "the upstream kept sending for 5 s after the abort";
    EXPECT_TRUE(EndedByPeer(*theirs));
    EXPECT_LT(theirs->sent, 256 * kMiB);

    expect_serves(proxy, peer, 1);
}

} // namespace
} // namespace uringfwd::test
