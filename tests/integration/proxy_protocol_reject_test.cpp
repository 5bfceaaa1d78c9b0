// accept_proxy against bad input, table-driven: each case ends with the client reset,
// one count under its documented close reason (README "PROXY protocol") and nothing
// else, and the engine goes on serving good clients on the same listener.
#include "tests/support/echo_server.hpp"
#include "tests/support/exchange.hpp"
#include "tests/support/proc_stats.hpp"
#include "tests/support/proxy_under_test.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/transfer_checks.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

struct BadCase {
    const char* name;
    std::string sent;  // then the client half-closes, unless `hold`
    bool hold = false; // sends and waits: the header never completes
    const char* route = "open";
    CloseReason reason;
};

std::string v2_prefix(uint8_t version_command, uint16_t length) {
    std::string s("\r\n\r\n\0\r\nQUIT\n", 12);
    s += static_cast<char>(version_command);
    s += static_cast<char>(0x11);
    s += static_cast<char>(length >> 8);
    s += static_cast<char>(length & 0xff);
    return s;
}

const BadCase kCases[] = {
    {"truncated", "PROXY TCP4 1.2.3.4 5.6.7.8", false, "open", CloseReason::InspectIncomplete},
    {"garbage", "GET / HTTP/1.0\r\n\r\n", false, "open", CloseReason::ProxyInvalid},
    {"bad_v1_port", "PROXY TCP4 1.2.3.4 5.6.7.8 1 99999\r\n", false, "open",
     CloseReason::ProxyInvalid},
    {"v1_oversized", "PROXY UNKNOWN " + std::string(150, 'x'), true, "open",
     CloseReason::InspectOversized},
    {"v2_wrong_version", v2_prefix(0x11, 12) + std::string(12, '\0'), false, "open",
     CloseReason::ProxyInvalid},
    {"v2_oversized", v2_prefix(0x21, 40000), true, "open", CloseReason::InspectOversized},
    {"v2_truncated", v2_prefix(0x21, 12) + "abc", false, "open", CloseReason::InspectIncomplete},
    {"late", "PROXY TCP4 1.2.3.4", true, "open", CloseReason::InspectTimeout},
    {"untrusted", "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\n", false, "guarded",
     CloseReason::ProxyUntrusted},
};

uint64_t total_closed(const EngineStats& s) {
    uint64_t all = 0;
    for (std::size_t i = 0; i < kCloseReasonCount; ++i)
        all += s.closed(static_cast<CloseReason>(i));
    return all;
}

TEST(ProxyProtocolReject, EachBadHeaderEndsInItsReasonAndTheEngineKeepsServing) {
    EchoServer echo;
    RouteConfig open;
    open.name = "open";
    open.listen = {loopback_any_port()};
    open.pool.members = {UpstreamMember{echo.endpoint()}};
    open.accept_proxy = true;
    open.inspect_timeout = 300ms;
    RouteConfig guarded = open;
    guarded.name = "guarded";
    guarded.trusted_sources = {"10.0.0.0/8", "::1/128"}; // not 127.0.0.1
    ProxyUnderTest proxy{{open, guarded}};

    for (const BadCase& c : kCases) {
        SCOPED_TRACE(c.name);
        const EngineStats before = proxy.stats();
        // An untrusted client is reset right after accept: its connect may already see it.
        UniqueFd client;
        if (try_connect(proxy.endpoint(c.route), 5000ms, client) == 0) {
            send_text(client.get(), c.sent, Deadline{5s}); // may fail once reset: fine
            if (!c.hold)
                shutdown_write(client.get());
            const IoResult r = recv_until_eof(client.get(), Deadline{5s});
            EXPECT_TRUE(r.ended_by_peer()) << to_string(r.status);
            EXPECT_EQ(r.bytes, 0u) << "nothing may reach a rejected client";
        }
        ASSERT_TRUE(eventually([&] { return total_closed(proxy.stats()) > total_closed(before); },
                               Deadline{5s}));
        const EngineStats after = proxy.stats();
        EXPECT_EQ(after.closed(c.reason), before.closed(c.reason) + 1) << after.to_line();
        EXPECT_EQ(total_closed(after), total_closed(before) + 1) << after.to_line();
    }
    EXPECT_TRUE(proxy.logs("PROXY header", Deadline{2s}));

    // A good client still gets through, its header gone from the stream.
    UniqueFd client = connect_to(proxy.endpoint("open"));
    ASSERT_EQ(
        send_text(client.get(), "PROXY TCP4 192.0.2.1 192.0.2.2 1000 80\r\n", Deadline{5s}).status,
        IoStatus::Ok);
    ExchangePlan plan;
    plan.send_bytes = 64 * 1024;
    plan.send_seed = 21;
    const ExchangeResult r = exchange(client, plan, Deadline{10s});
    EXPECT_TRUE(ReceivedPayload(r, 21, 64 * 1024)) << r.describe();
}

} // namespace
} // namespace uringfwd::test
