// max_duration (RouteConfig::max_duration): a connection forwarding longer than the
// route allows is closed on time, busy or not, and counted as closed_max_duration: with
// FIN toward both peers, or a reset of both when the proxy would drop bytes with it; a
// route without one leaves its connections alone.
#include "tests/support/eventually.hpp"
#include "tests/support/pool_members.hpp"
#include "tests/support/proxy_under_test.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"

#include <gtest/gtest.h>

#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <thread>
#include <vector>

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

// A byte each way, in lock-step, every 50 ms from `opened` on, until the proxy ends the
// connection or `busy_for` has passed. Returns when the client's side saw its end: the
// client's read of it (FIN or reset) and when.
struct ClientEnd {
    IoStatus status = IoStatus::NotDone;
    Clock::time_point at{};
};

ClientEnd exchange_bytes(int client, int server, std::chrono::milliseconds busy_for,
                         Clock::time_point opened) {
    for (int i = 0; i < 100 && Clock::now() - opened < busy_for; ++i) { // 5 s at most
        if (send_text(client, "c", Deadline{1s}).status != IoStatus::Ok)
            break;
        IoStatus at_server = IoStatus::NotDone;
        if (!read_byte_or_eof(server, Deadline{2s}, at_server))
            break; // the proxy ended the upstream's side (checked by the caller)
        if (send_text(server, "s", Deadline{1s}).status != IoStatus::Ok)
            break;
        IoStatus at_client = IoStatus::NotDone;
        if (!read_byte_or_eof(client, Deadline{2s}, at_client))
            return {at_client, Clock::now()};
        std::this_thread::sleep_for(50ms);
    }
    // Quiet from here, or a send failed once the proxy had closed: read the client's
    // side on to its end.
    const IoResult rest = recv_until_eof(client, Deadline{3s});
    return {rest.status, Clock::now()};
}

// The close came between 1000 ms (the route's max_duration) and 2500 ms after the
// connection opened, and was counted as closed_max_duration.
void expect_closed_by_max_duration(ProxyUnderTest& proxy, Clock::duration took) {
    EXPECT_GE(took, 1000ms);
    EXPECT_LE(took, 2500ms);
    // Counted as the shard publishes its counters, after the batch that closed it.
    EXPECT_TRUE(eventually([&] { return proxy.stats().closed_max_duration == 1u; }, Deadline{2s}))
        << proxy.stats().to_line();
}

// Busy all along: the close may find a byte on its way through the proxy, and then
// resets both sides rather than let either take the cut for a clean end (the test
// below); it comes on time either way, and each side sees it.
TEST(MaxDuration, ClosesABusyConnectionOnTime) {
    Listener upstream = listen_loopback(Family::Inet4);
    ProxyUnderTest proxy{{route_to(upstream.endpoint(), 1000ms)}, one_shard};
    const Clock::time_point opened = Clock::now();
    UniqueFd client = connect_to(proxy.endpoint());
    UniqueFd server = accept_one(upstream.fd(), Deadline{5s});
    const ClientEnd end = exchange_bytes(client.get(), server.get(), 5s, opened);
    EXPECT_TRUE(end.status == IoStatus::Eof || end.status == IoStatus::Reset)
        << to_string(end.status);
    const IoResult server_end = recv_until_eof(server.get(), Deadline{3s});
    EXPECT_TRUE(server_end.status == IoStatus::Eof || server_end.status == IoStatus::Reset)
        << to_string(server_end.status);
    expect_closed_by_max_duration(proxy, end.at - opened);
    EXPECT_EQ(proxy.stats().closed_idle_timeout, 0u);
}

// Busy until 600 ms, then nothing in flight when the 1000 ms run out: FIN toward both.
TEST(MaxDuration, ClosesWithFinOnBothSidesWhenNothingIsOnItsWay) {
    Listener upstream = listen_loopback(Family::Inet4);
    ProxyUnderTest proxy{{route_to(upstream.endpoint(), 1000ms)}, one_shard};
    const Clock::time_point opened = Clock::now();
    UniqueFd client = connect_to(proxy.endpoint());
    UniqueFd server = accept_one(upstream.fd(), Deadline{5s});
    const ClientEnd end = exchange_bytes(client.get(), server.get(), 600ms, opened);
    EXPECT_EQ(end.status, IoStatus::Eof) << to_string(end.status); // FIN, not RST
    const IoResult server_end = recv_until_eof(server.get(), Deadline{3s});
    EXPECT_EQ(server_end.status, IoStatus::Eof) << to_string(server_end.status);
    expect_closed_by_max_duration(proxy, end.at - opened);
}

// The upstream reads nothing, so the proxy holds the client's bytes (a full pipe or
// copy buffers) when the time runs out: a FIN would let the upstream take what it got
// for all of it. Both sides are reset instead.
TEST(MaxDuration, ResetsBothSidesWhenTheCloseWouldLoseBytes) {
    Listener upstream = listen_loopback(Family::Inet4);
    ProxyUnderTest proxy{{route_to(upstream.endpoint(), 1000ms)}, one_shard};
    // More than every buffer on the way holds; the send stalls until the proxy resets.
    // Made before the connection opens, so that its time (long under TSan) is not the
    // connection's.
    const std::vector<std::byte> bulk(64u << 20, std::byte{'x'});
    const Clock::time_point opened = Clock::now();
    UniqueFd client = connect_to(proxy.endpoint());
    UniqueFd server = accept_one(upstream.fd(), Deadline{5s});
    const IoResult sent = send_all(client.get(), bulk, Deadline{5s});
    EXPECT_EQ(sent.status, IoStatus::Reset) << to_string(sent.status) << " after " << sent.bytes;
    EXPECT_LE(Clock::now() - opened, 2500ms);
    const IoResult server_end = recv_until_eof(server.get(), Deadline{3s});
    EXPECT_EQ(server_end.status, IoStatus::Reset)
        << to_string(server_end.status) << " after " << server_end.bytes;
    EXPECT_LT(server_end.bytes, sent.bytes); // what the proxy held never came
    // Counted as the shard publishes its counters, after the batch that closed it.
    EXPECT_TRUE(eventually([&] { return proxy.stats().closed_max_duration == 1u; }, Deadline{2s}))
        << proxy.stats().to_line();
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
