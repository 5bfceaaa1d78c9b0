// The inline splice mechanism (SpliceMechanism::Inline, docs/kernel.md §1.9): splice(2)
// on the shard's own thread once the ring reports a socket ready. It must move every
// byte in order with no io-wq kernel thread at all, and it must never make the shard
// wait: a connection whose both peers have stopped reading cannot hold up another
// connection of the same shard.
#include "tests/support/echo_server.hpp"
#include "tests/support/exchange.hpp"
#include "tests/support/proc_stats.hpp"
#include "tests/support/proxy_under_test.hpp"
#include "tests/support/scripted_peer.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/transfer_checks.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <future>
#include <span>
#include <thread>
#include <vector>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kMiB = 1024 * 1024;

void inline_splicing(EngineConfig& c) {
    c.placement.shards = 1;
    c.data_path = DataPath::Splice;
    c.splice.splice_mechanism = SpliceMechanism::Inline;
}

RouteConfig route_to(std::string name, const Endpoint& upstream) {
    RouteConfig r;
    r.name = std::move(name);
    r.listen = {loopback_any_port()};
    UpstreamMember m;
    m.address = upstream;
    r.pool.members = {m};
    return r;
}

TEST(InlineSplice, MovesBothWaysInOrderWithoutKernelThreads) {
    // 48 MiB each way at once, through sockets that may sit in slots of the file table
    // (an fd is installed for them) or be plain fds (URING_FWD_TEST_DIRECT=off).
    constexpr uint64_t kSize = 48 * kMiB;
    ExchangePlan upstream_plan;
    upstream_plan.send_bytes = kSize;
    upstream_plan.send_seed = 31;
    ScriptedPeer upstream{upstream_plan};
    ProxyUnderTest proxy{upstream.endpoint(), inline_splicing};

    UniqueFd client = connect_to(proxy.endpoint());
    ExchangePlan mine;
    mine.send_bytes = kSize;
    mine.send_seed = 32;
    const ExchangeResult got = exchange(client, mine, Deadline{60s});
    EXPECT_TRUE(ReceivedPayload(got, 31, kSize));
    const auto theirs = upstream.wait_result(Deadline{10s});
    ASSERT_TRUE(theirs.has_value());
    EXPECT_TRUE(ReceivedPayload(*theirs, 32, kSize));

    const EngineStats s = proxy.stats();
    EXPECT_GT(s.inline_splices, 0u) << s.to_line();
    EXPECT_EQ(s.inline_splices, s.splices) << "every splice was inline: " << s.to_line();
    EXPECT_EQ(s.iowq_threads, 0u) << "an inline splice needs no io-wq worker: " << s.to_line();
    EXPECT_EQ(s.bytes_to_upstream, kSize);
    EXPECT_EQ(s.bytes_to_client, kSize);
}

TEST(InlineSplice, StalledPeersOfOneConnectionDoNotHoldUpAnother) {
    // Connection A: both its client and its upstream send 24 MiB and read nothing for
    // 4 s, so each direction ends with its pipe full and its destination full. Meanwhile
    // connection B, on the same shard, makes 200 small round trips; each must come back
    // promptly: were an inline splice to wait for room or data, B would stop dead.
    constexpr uint64_t kSize = 24 * kMiB;
    constexpr auto kStall = 4s;
    ExchangePlan stalled_upstream;
    stalled_upstream.send_bytes = kSize;
    stalled_upstream.send_seed = 41;
    stalled_upstream.read_delay = kStall;
    ScriptedPeer upstream_a{stalled_upstream};
    EchoServer upstream_b;
    ProxyUnderTest proxy{
        {route_to("a", upstream_a.endpoint()), route_to("b", upstream_b.endpoint())},
        inline_splicing};

    UniqueFd client_a = connect_to(proxy.endpoint("a"));
    std::future<ExchangeResult> a = std::async(std::launch::async, [&] {
        ExchangePlan plan;
        plan.send_bytes = kSize;
        plan.send_seed = 42;
        plan.read_delay = kStall;
        return exchange(client_a, plan, Deadline{60s});
    });
    // Until both of A's directions are stuck: its destinations hold no more.
    ASSERT_TRUE(eventually(
        [&] {
            const EngineStats s = proxy.stats();
            return s.short_splices >= 2 && s.pipes_leased >= 2;
        },
        Deadline{3s}))
        << proxy.stats().to_line();

    UniqueFd client_b = connect_to(proxy.endpoint("b"));
    std::array<std::byte, 64> ping{};
    std::array<std::byte, 64> pong{};
    Clock::duration slowest{};
    const auto started = Clock::now();
    for (int i = 0; i < 200; ++i) {
        ping.fill(static_cast<std::byte>(i));
        const auto sent_at = Clock::now();
        ASSERT_EQ(send_all(client_b.get(), ping, Deadline{1s}).status, IoStatus::Ok) << i;
        ASSERT_EQ(recv_all(client_b.get(), pong, Deadline{1s}).status, IoStatus::Ok)
            << "round trip " << i << " of the other connection got no answer within 1 s";
        ASSERT_EQ(pong, ping);
        slowest = std::max(slowest, Clock::now() - sent_at);
    }
    const auto b_took = Clock::now() - started;
    RecordProperty(
        "slowest_round_trip_us",
        static_cast<int>(std::chrono::duration_cast<std::chrono::microseconds>(slowest).count()));
    EXPECT_LT(b_took, kStall - 1s) << "B's round trips did not all fit in A's stall";
    const EngineStats during = proxy.stats();
    EXPECT_LT(during.bytes_to_upstream + during.bytes_to_client, 2 * kSize)
        << "A was still stalled while B ran: " << during.to_line();

    // A's peers read again: everything arrives, in order.
    const ExchangeResult mine = a.get();
    EXPECT_TRUE(ReceivedPayload(mine, 41, kSize));
    const auto theirs = upstream_a.wait_result(Deadline{30s});
    ASSERT_TRUE(theirs.has_value());
    EXPECT_TRUE(ReceivedPayload(*theirs, 42, kSize));
    EXPECT_EQ(proxy.stats().iowq_threads, 0u);
}

// A sender that writes 256 KiB every 2 ms: every wake-up finds a bulk chunk, less than
// half a pipe. With bulk_coalesce such wake-ups wait for the shard's next tick (the
// counter says how often), and every byte still arrives in order.
TEST(InlineSplice, PacedBulkIsCoalescedAndArrivesIntact) {
    Listener upstream = listen_loopback(Family::Inet4);
    ProxyUnderTest proxy{upstream.endpoint(), inline_splicing};
    ASSERT_GT(proxy.config().splice.bulk_coalesce.count(), 0) << "coalescing is on by default";

    UniqueFd client = connect_to(proxy.endpoint());
    UniqueFd server = accept_one(upstream.fd(), Deadline{5s});
    constexpr std::size_t kChunk = 256 * 1024;
    constexpr int kChunks = 40;
    std::future<IoResult> sent = std::async(std::launch::async, [&] {
        std::vector<std::byte> chunk(kChunk);
        IoResult r;
        for (int i = 0; i < kChunks; ++i) {
            for (std::size_t j = 0; j < kChunk; ++j)
                chunk[j] = static_cast<std::byte>((i * 131 + j) & 0xff);
            r = send_all(client.get(), chunk, Deadline{10s});
            if (r.status != IoStatus::Ok)
                return r;
            std::this_thread::sleep_for(2ms);
        }
        shutdown_write(client.get());
        return r;
    });
    std::vector<std::byte> got;
    const IoResult eof =
        recv_until_eof(server.get(), Deadline{30s}, [&](std::span<const std::byte> data) {
            got.insert(got.end(), data.begin(), data.end());
        });
    EXPECT_EQ(sent.get().status, IoStatus::Ok);
    EXPECT_EQ(eof.status, IoStatus::Eof);
    ASSERT_EQ(got.size(), kChunk * kChunks);
    for (std::size_t k = 0; k < got.size(); ++k)
        ASSERT_EQ(got[k], static_cast<std::byte>((k / kChunk * 131 + k % kChunk) & 0xff)) << k;
    EXPECT_GT(proxy.stats().coalesced, 0u) << proxy.stats().to_line();
}

// Messages are never held: after a download, 64-byte round trips on the same
// connection are each answered without waiting for a tick.
TEST(InlineSplice, MessagesAfterBulkAreNotCoalesced) {
    EchoServer upstream;
    ProxyUnderTest proxy{upstream.endpoint(), inline_splicing};
    UniqueFd client = connect_to(proxy.endpoint());
    // A bulk phase first: 8 MiB echoed.
    std::vector<std::byte> bulk(8 * kMiB, std::byte{7});
    std::future<IoResult> sent =
        std::async(std::launch::async, [&] { return send_all(client.get(), bulk, Deadline{20s}); });
    std::vector<std::byte> back(bulk.size());
    ASSERT_EQ(recv_all(client.get(), back, Deadline{20s}).status, IoStatus::Ok);
    ASSERT_EQ(sent.get().status, IoStatus::Ok);
    std::array<std::byte, 64> ping{};
    std::array<std::byte, 64> pong{};
    // The shard counts the last bulk wake-up's coalescing after it has delivered the
    // bytes, so the client may see them all first. A round trip on a second connection
    // of the same (single) shard is served only after that handler has returned.
    UniqueFd fence = connect_to(proxy.endpoint());
    ASSERT_EQ(send_all(fence.get(), ping, Deadline{2s}).status, IoStatus::Ok);
    ASSERT_EQ(recv_all(fence.get(), pong, Deadline{2s}).status, IoStatus::Ok);
    const uint64_t before = proxy.stats().coalesced;
    for (int i = 0; i < 50; ++i) {
        ping.fill(static_cast<std::byte>(i));
        ASSERT_EQ(send_all(client.get(), ping, Deadline{2s}).status, IoStatus::Ok);
        ASSERT_EQ(recv_all(client.get(), pong, Deadline{2s}).status, IoStatus::Ok);
        ASSERT_EQ(pong, ping);
    }
    EXPECT_EQ(proxy.stats().coalesced, before)
        << "a 64-byte message waited for a tick: " << proxy.stats().to_line();
}

TEST(InlineSplice, CannotBeHadWithBulkPark) {
    // A parked socket is blocking (docs/kernel.md §1.8): an inline splice from or into
    // it could make the shard wait, so asking for both is refused at start.
    EchoServer upstream;
    EngineConfig config;
    config.listen = loopback_any_port();
    config.upstream = upstream.endpoint();
    config.placement.shards = 1;
    config.splice.splice_mechanism = SpliceMechanism::Inline;
    config.experimental.bulk_park = 20ms;
    config.log_level = LogLevel::Error;
    try {
        auto engine = Engine::start(config);
        FAIL() << "started with inline splices and bulk_park";
    } catch (const StartError& e) {
        EXPECT_NE(std::string(e.what()).find("cannot be had with bulk_park"), std::string::npos)
            << e.what();
    }
    // auto keeps the ring then, and forwards.
    config.splice.splice_mechanism = SpliceMechanism::Auto;
    auto engine = Engine::start(config);
    EXPECT_NE(engine->describe().find("splices ring"), std::string::npos) << engine->describe();
    engine->stop(0ms);
    engine->wait();
}

} // namespace
} // namespace uringfwd::test
