// max_duration (RouteConfig::max_duration): a connection forwarding longer than the
// route allows is closed on time, with FIN toward both peers, busy or not, and counted
// as closed_max_duration; a route without one leaves its connections alone.
#include "tests/support/pool_members.hpp"
#include "tests/support/proxy_under_test.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"

#include <gtest/gtest.h>

#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <thread>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

RouteConfig route_to(const Endpoint& upstream, std::chrono::milliseconds max_duration) {
    RouteConfig r;
    r.name = "web";
    r.listen = {loopback_any_port()};
    r.pool.members = {member_at(upstream)};
    r.max_duration = max_duration;
    return r;
}

void one_shard(EngineConfig& c) {
    c.placement.shards = 1;
}

// Whether a byte can be read before `deadline`: true for data, false at FIN; fails the
// test on a reset or a timeout.
bool read_byte_or_eof(int fd, const Deadline& deadline, IoStatus& status) {
    std::byte b{};
    const IoResult got = recv_all(fd, std::span<std::byte>(&b, 1), deadline);
    status = got.status;
    return got.status == IoStatus::Ok;
}

TEST(MaxDuration, ClosesABusyConnectionWithFinOnBothSidesOnTime) {
    Listener upstream = listen_loopback(Family::Inet4);
    ProxyUnderTest proxy{{route_to(upstream.endpoint(), 1000ms)}, one_shard};
    const Clock::time_point opened = Clock::now();
    UniqueFd client = connect_to(proxy.endpoint());
    UniqueFd server = accept_one(upstream.fd(), Deadline{5s});
    // Busy all along: a byte each way every 50 ms, so it is never idle.
    IoStatus client_end = IoStatus::NotDone;
    bool client_saw_end = false; // the client's read ended (FIN or an error)
    Clock::time_point client_closed{};
    for (int i = 0; i < 100; ++i) { // 5 s at most
        if (send_text(client.get(), "c", Deadline{1s}).status != IoStatus::Ok)
            break;
        IoStatus at_server = IoStatus::NotDone;
        if (!read_byte_or_eof(server.get(), Deadline{2s}, at_server)) {
            EXPECT_EQ(at_server, IoStatus::Eof) << to_string(at_server);
            break;
        }
        if (send_text(server.get(), "s", Deadline{1s}).status != IoStatus::Ok)
            break;
        if (!read_byte_or_eof(client.get(), Deadline{2s}, client_end)) {
            client_saw_end = true;
            client_closed = Clock::now();
            break;
        }
        std::this_thread::sleep_for(50ms);
    }
    // The upstream side ended first, or a send failed once the proxy had closed: read
    // the client's side on to its end.
    if (!client_saw_end) {
        const IoResult rest = recv_until_eof(client.get(), Deadline{3s});
        client_end = rest.status;
        client_closed = Clock::now();
    }
    EXPECT_EQ(client_end, IoStatus::Eof) << to_string(client_end); // FIN, not RST
    const IoResult server_end = recv_until_eof(server.get(), Deadline{3s});
    EXPECT_EQ(server_end.status, IoStatus::Eof) << to_string(server_end.status);
    const auto took = client_closed - opened;
    EXPECT_GE(took, 1000ms);
    EXPECT_LE(took, 2500ms);
    EXPECT_EQ(proxy.stats().closed_max_duration, 1u) << proxy.stats().to_line();
    EXPECT_EQ(proxy.stats().closed_idle_timeout, 0u);
}

TEST(MaxDuration, ZeroLeavesConnectionsOpen) {
    Listener upstream = listen_loopback(Family::Inet4);
    ProxyUnderTest proxy{{route_to(upstream.endpoint(), 0ms)}, one_shard};
    UniqueFd client = connect_to(proxy.endpoint());
    UniqueFd server = accept_one(upstream.fd(), Deadline{5s});
    std::this_thread::sleep_for(1500ms);
    ASSERT_EQ(send_text(client.get(), "c", Deadline{1s}).status, IoStatus::Ok);
    IoStatus at_server = IoStatus::NotDone;
    EXPECT_TRUE(read_byte_or_eof(server.get(), Deadline{2s}, at_server)) << to_string(at_server);
    EXPECT_EQ(proxy.stats().closed_max_duration, 0u) << proxy.stats().to_line();
}

} // namespace
} // namespace uringfwd::test
