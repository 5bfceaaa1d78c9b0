// Moving connections between the shards of one engine (Engine::move_connection,
// rebalance; docs/handover.md "Between shards"), over real sockets on two shards: a
// moved connection goes on where it stopped, with its id, its byte counts and one
// observer record at its real end; a stream moved again and again under traffic in both
// directions arrives whole; rebalance evens out shards that were not.
#include "tests/support/echo_server.hpp"
#include "tests/support/eventually.hpp"
#include "tests/support/exchange.hpp"
#include "tests/support/proxy_under_test.hpp"
#include "tests/support/recording_observer.hpp"
#include "tests/support/scripted_peer.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/transfer_checks.hpp"

#include <gtest/gtest.h>

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kMiB = 1024 * 1024;

RouteConfig route_to(const Endpoint& upstream) {
    RouteConfig r;
    r.name = "web";
    r.listen = {loopback_any_port()};
    UpstreamMember m;
    m.address = upstream;
    r.pool.members.push_back(m);
    return r;
}

ConfigEdit two_shards(std::shared_ptr<RecordingObserver> observer = {}) {
    return [observer](EngineConfig& c) {
        c.placement.shards = 2;
        if (observer)
            c.observer = observer;
    };
}

std::optional<OpenConnection> find(Engine& engine, uint64_t id) {
    for (const OpenConnection& c : engine.connections())
        if (c.id == id)
            return c;
    return std::nullopt;
}

// Asks for the move and waits until the engine lists the connection on `shard`.
::testing::AssertionResult moves_to(Engine& engine, uint64_t id, unsigned shard,
                                    const Deadline& deadline = Deadline{5s}) {
    const ChangeResult asked = engine.move_connection(id, shard);
    if (!asked.ok)
        return ::testing::AssertionFailure() << "move refused: " << asked.error;
    std::optional<OpenConnection> seen;
    if (eventually(
            [&] {
                seen = find(engine, id);
                return seen && seen->shard == shard;
            },
            deadline))
        return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << "connection " << id << " not on shard " << shard << " in time: "
           << (seen ? "on shard " + std::to_string(seen->shard) : std::string("not listed"));
}

std::vector<std::byte> bytes(std::size_t n, char fill) {
    return std::vector<std::byte>(n, static_cast<std::byte>(fill));
}

// `up` bytes from the client to the server and `down` back, each read whole.
void exchange_once(int client, int server, std::size_t up, std::size_t down) {
    const std::vector<std::byte> a = bytes(up, 'u');
    const std::vector<std::byte> b = bytes(down, 'd');
    std::vector<std::byte> got(std::max(up, down));
    ASSERT_EQ(send_all(client, a, Deadline{5s}).status, IoStatus::Ok);
    ASSERT_EQ(recv_all(server, std::span(got.data(), up), Deadline{5s}).status, IoStatus::Ok);
    EXPECT_TRUE(std::equal(a.begin(), a.end(), got.begin()));
    ASSERT_EQ(send_all(server, b, Deadline{5s}).status, IoStatus::Ok);
    ASSERT_EQ(recv_all(client, std::span(got.data(), down), Deadline{5s}).status, IoStatus::Ok);
    EXPECT_TRUE(std::equal(b.begin(), b.end(), got.begin()));
}

// A connection through the engine's two shards to a listener of the test's, accepted
// there: what most tests here start from (ASSERT_TRUE(server) first).
struct ConnectionThroughTwoShards {
    explicit ConnectionThroughTwoShards(const ConfigEdit& edit = two_shards())
        : proxy{{route_to(upstream.endpoint())}, edit}, client(connect_to(proxy.endpoint())),
          server(accept_one(upstream.fd(), Deadline{5s})) {}

    Listener upstream = listen_loopback(Family::Inet4);
    ProxyUnderTest proxy;
    UniqueFd client;
    UniqueFd server;
};

TEST(ShardMove, AConnectionMovesAndGoesOnWithItsIdCountsAndOneObserverRecord) {
    auto observer = std::make_shared<RecordingObserver>();
    ConnectionThroughTwoShards c{two_shards(observer)};
    ASSERT_EQ(c.proxy.engine().info().shards.size(), 2u);
    ASSERT_TRUE(c.server);

    exchange_once(c.client.get(), c.server.get(), 300, 700);
    std::vector<OpenConnection> open;
    ASSERT_TRUE(eventually(
        [&] {
            open = c.proxy.engine().connections();
            return open.size() == 1 && open[0].bytes_to_client == 700;
        },
        Deadline{5s}));
    const uint64_t id = open[0].id;
    const unsigned first = open[0].shard;
    const unsigned other = 1 - first;

    ASSERT_TRUE(moves_to(c.proxy.engine(), id, other));
    std::optional<OpenConnection> moved = find(c.proxy.engine(), id);
    ASSERT_TRUE(moved);
    EXPECT_EQ(moved->bytes_to_upstream, 300u);
    EXPECT_EQ(moved->bytes_to_client, 700u);
    EXPECT_EQ(moved->phase, "forwarding");
    EXPECT_EQ(moved->client, open[0].client);
    EXPECT_EQ(moved->upstream, open[0].upstream);
    exchange_once(c.client.get(), c.server.get(), 100, 200); // served from the other shard

    ASSERT_TRUE(moves_to(c.proxy.engine(), id, first)); // and back
    exchange_once(c.client.get(), c.server.get(), 1000, 2000);

    EngineStats stats = c.proxy.stats();
    EXPECT_EQ(stats.moved_out, 2u);
    EXPECT_EQ(stats.moved_in, 2u);
    EXPECT_EQ(stats.moves_given_up, 0u);
    EXPECT_EQ(stats.accepted, 1u); // moved, not accepted again
    EXPECT_EQ(stats.closed(CloseReason::HandedOver), 0u);
    EXPECT_EQ(stats.active, 1u);

    // It ends as any connection does: FIN each way, and one record of its whole life.
    ASSERT_EQ(::shutdown(c.client.get(), SHUT_WR), 0);
    std::byte one{};
    EXPECT_EQ(recv_all(c.server.get(), std::span<std::byte>(&one, 1), Deadline{5s}).status,
              IoStatus::Eof);
    c.server.reset();
    EXPECT_EQ(recv_all(c.client.get(), std::span<std::byte>(&one, 1), Deadline{5s}).status,
              IoStatus::Eof);
    ASSERT_TRUE(eventually([&] { return observer->closed().size() == 1; }, Deadline{5s}));
    const ConnectionRecord record = observer->closed().front();
    EXPECT_EQ(record.info.id, id);
    EXPECT_EQ(record.reason, CloseReason::Clean);
    EXPECT_EQ(record.bytes_to_upstream, 1400u);
    EXPECT_EQ(record.bytes_to_client, 2900u);
    EXPECT_EQ(observer->opened(), 1u);
    EXPECT_TRUE(
        eventually([&] { return c.proxy.stats().closed(CloseReason::Clean) == 1; }, Deadline{5s}));
}

TEST(ShardMove, AMovedConnectionIsClosedByItsIdOnTheShardItMovedTo) {
    ConnectionThroughTwoShards c;
    ASSERT_TRUE(c.server);
    exchange_once(c.client.get(), c.server.get(), 10, 10);
    std::vector<OpenConnection> open = c.proxy.engine().connections();
    ASSERT_EQ(open.size(), 1u);
    ASSERT_TRUE(moves_to(c.proxy.engine(), open[0].id, 1 - open[0].shard));

    const ChangeResult closed = c.proxy.engine().close_connection(open[0].id);
    ASSERT_TRUE(closed.ok) << closed.error;
    std::byte one{};
    EXPECT_EQ(recv_all(c.client.get(), std::span<std::byte>(&one, 1), Deadline{5s}).status,
              IoStatus::Reset);
    EXPECT_EQ(recv_all(c.server.get(), std::span<std::byte>(&one, 1), Deadline{5s}).status,
              IoStatus::Reset);
}

TEST(ShardMove, AMoveThatCannotBeSaysWhy) {
    ConnectionThroughTwoShards c;
    ASSERT_TRUE(c.server);
    exchange_once(c.client.get(), c.server.get(), 10, 10);
    std::vector<OpenConnection> open = c.proxy.engine().connections();
    ASSERT_EQ(open.size(), 1u);
    const uint64_t id = open[0].id;

    ChangeResult r = c.proxy.engine().move_connection(id + 1000, 0);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.error, "no open connection " + std::to_string(id + 1000));
    r = c.proxy.engine().move_connection(id, 2);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.error, "no shard 2: the engine has 2 (0 to 1)");
    r = c.proxy.engine().move_connection(id, open[0].shard);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.error, "connection " + std::to_string(id) + " cannot move to shard " +
                           std::to_string(open[0].shard) + ": it is on shard " +
                           std::to_string(open[0].shard) + " already");
    exchange_once(c.client.get(), c.server.get(), 10, 10); // untouched
}

// Both directions busy and held back by their readers the whole time (each side's
// reader is slower than the other's writer), so a direction always has bytes in a pipe
// or a copy buffer: the connection is quiet only because a leaving direction takes
// nothing more while it delivers what it holds. Moved back and forth under that load,
// both streams arrive whole, and the counts add up.
TEST(ShardMove, AStreamMovedBackAndForthUnderTrafficBothWaysArrivesWhole) {
    constexpr uint64_t kDown = 30 * kMiB;
    constexpr uint64_t kUp = 15 * kMiB;
    const ExchangePlan upstream_plan =
        paced_duplex_plan(kDown, 41, 6 * kMiB); // about 2.5 s of upload
    ScriptedPeer peer{upstream_plan};
    auto observer = std::make_shared<RecordingObserver>();
    ProxyUnderTest proxy{{route_to(peer.endpoint())}, two_shards(observer)};

    UniqueFd client = connect_to(proxy.endpoint());
    const ExchangePlan client_plan =
        paced_duplex_plan(kUp, 42, 12 * kMiB); // about 2.5 s of download
    ExchangeResult mine;
    std::atomic<bool> done{false};
    std::thread client_thread([&] {
        mine = exchange(client, client_plan, Deadline{60s});
        done = true;
    });

    std::optional<OpenConnection> conn;
    ASSERT_TRUE(eventually(
        [&] {
            std::vector<OpenConnection> open = proxy.engine().connections();
            if (open.size() == 1 && open[0].phase == "forwarding")
                conn = open[0];
            return conn.has_value();
        },
        Deadline{5s}));
    unsigned moves = 0;
    unsigned shard = conn->shard;
    while (!done && moves < 20) {
        std::this_thread::sleep_for(50ms);
        if (done)
            break;
        const ChangeResult asked = proxy.engine().move_connection(conn->id, 1 - shard);
        if (!asked.ok) {
            // It ended meanwhile (both streams done): the loop is over.
            EXPECT_NE(asked.error.find("no open connection"), std::string::npos) << asked.error;
            break;
        }
        // A listing taken while the connection is between the two shards (detached
        // from one, not yet adopted by the other) does not show it: not seen is not
        // ended, unless the streams are done.
        std::optional<OpenConnection> seen;
        const bool happened = eventually(
            [&] {
                seen = find(proxy.engine(), conn->id);
                return (seen && seen->shard != shard) || done.load();
            },
            Deadline{10s});
        if (done.load() && !(seen && seen->shard != shard))
            break; // ended
        EXPECT_TRUE(happened) << "move " << moves + 1 << " did not happen";
        if (!happened)
            break; // not moved (the client thread is joined below)
        shard = seen->shard;
        ++moves;
    }
    client_thread.join();
    EXPECT_TRUE(BothWaysIntact(mine, client_plan, peer, upstream_plan, Deadline{30s}));
    // Under way for about 2.5 s, a move 50 ms after the last is done; each waits for
    // both directions to rest: a pipe with bytes goes along as it is, copy chunks once
    // they fit in a pipe (with bulk buffers, a MiB or two drains at 6 MiB/s first).
    // Here: 20 moves (the cap) on the splice paths, 4 to 11 on copy.
    EXPECT_GE(moves, 2u);
    std::printf("moved %u times under traffic\n", moves);

    ASSERT_TRUE(eventually([&] { return observer->closed().size() == 1; }, Deadline{5s}));
    const ConnectionRecord record = observer->closed().front();
    EXPECT_EQ(record.bytes_to_upstream, kUp);
    EXPECT_EQ(record.bytes_to_client, kDown);
    EXPECT_EQ(record.reason, CloseReason::Clean);
    const EngineStats stats = proxy.stats();
    // A move asked for as the streams ended may have happened before the close and not
    // been seen by the loop.
    EXPECT_GE(stats.moved_in, moves);
    EXPECT_LE(stats.moved_in, moves + 1);
    EXPECT_EQ(stats.moves_given_up, 0u);
    EXPECT_EQ(stats.bytes_to_upstream, kUp);
    EXPECT_EQ(stats.bytes_to_client, kDown);
}

// An upload to an upstream that reads nothing, `kStuckUpload` bytes: more than the
// sockets' buffers take, so the rest waits in the engine (a pipe, or copy buffers). The
// client's sender runs until the upstream reads; the returned connection is the engine's
// view once the upload has stalled.
constexpr std::size_t kStuckUpload = 16 * kMiB;

OpenConnection stall_an_upload(ConnectionThroughTwoShards& c, const std::vector<std::byte>& upload,
                               std::thread& sender) {
    sender = std::thread([&c, &upload] { (void)send_all(c.client.get(), upload, Deadline{30s}); });
    EXPECT_TRUE(eventually(
        [&] {
            std::vector<OpenConnection> open = c.proxy.engine().connections();
            return open.size() == 1 && open[0].bytes_to_upstream > 0;
        },
        Deadline{5s}));
    std::this_thread::sleep_for(200ms); // the upstream's buffers full, the engine's too
    return c.proxy.engine().connections().at(0);
}

ConfigEdit two_shards_on(DataPath path, const ConfigEdit& more = {}) {
    return [path, more](EngineConfig& c) {
        c.placement.shards = 2;
        c.data_path = path;
        if (more)
            more(c);
    };
}

// A connection whose upload stalls at an upstream that reads nothing moves away and
// back while it is stuck; once the upstream reads, every byte arrives once, in order,
// the counts are right and every pipe is back in a pool.
void check_a_stuck_upload_moves(const ConfigEdit& edit) {
    ConnectionThroughTwoShards c{edit};
    ASSERT_TRUE(c.server);
    std::vector<std::byte> upload(kStuckUpload);
    for (std::size_t i = 0; i < upload.size(); ++i) // a byte's place is in its value
        upload[i] = static_cast<std::byte>((i * 7 + i / 4096) & 0xff);
    std::thread sender;
    const OpenConnection before = stall_an_upload(c, upload, sender);
    const unsigned first = before.shard;

    EXPECT_TRUE(moves_to(c.proxy.engine(), before.id, 1 - first, Deadline{3s}));
    EXPECT_TRUE(moves_to(c.proxy.engine(), before.id, first, Deadline{3s})) << "and back, stuck";
    EngineStats stats = c.proxy.stats();
    EXPECT_EQ(stats.moved_out, 2u);
    EXPECT_EQ(stats.moves_given_up, 0u);

    std::vector<std::byte> got(kStuckUpload);
    EXPECT_EQ(recv_all(c.server.get(), got, Deadline{30s}).status, IoStatus::Ok);
    sender.join();
    EXPECT_TRUE(got == upload) << "the upload arrived changed";
    exchange_once(c.client.get(), c.server.get(), 10, 10); // and it goes on, both ways
    const std::optional<OpenConnection> after = find(c.proxy.engine(), before.id);
    ASSERT_TRUE(after);
    EXPECT_EQ(after->bytes_to_upstream, kStuckUpload + 10);
    stats = c.proxy.stats();
    EXPECT_EQ(stats.bytes_to_upstream, kStuckUpload + 10);
    EXPECT_TRUE(eventually([&] { return c.proxy.stats().pipes_leased == 0; }, Deadline{2s}))
        << "pipes still leased: " << c.proxy.stats().pipes_leased;
}

// On the splice path the bytes the upstream has not taken wait in the direction's pipe,
// which moves with the connection (docs/handover.md): the move does not wait for the
// upstream to read.
TEST(ShardMove, AConnectionWhoseUpstreamReadsNothingMovesWithWhatItsPipeHolds) {
    check_a_stuck_upload_moves(two_shards_on(DataPath::Splice));
}

// On the copy path they wait in copy chunks, whose send the pause cancels: what it did
// not send goes into a pipe, which moves (its 2 small buffers fit in one).
TEST(ShardMove, ACopyingConnectionWhoseUpstreamReadsNothingMovesWithItsChunksInAPipe) {
    check_a_stuck_upload_moves(
        two_shards_on(DataPath::Copy, [](EngineConfig& c) { c.copy.bulk_buffers = 0; }));
}

// Copy chunks that a pipe cannot take (8 bulk buffers of 256 KiB, more than a 64 KiB
// pipe) stay in this process's buffers (docs/handover.md): the connection is never
// quiet. The move gives up at its limit and says so; the connection stays where it was,
// and once the upstream reads, every byte arrives.
TEST(ShardMove, AMoveGivesUpOnAConnectionWhoseChunksNoPipeTakes) {
    ConnectionThroughTwoShards c{
        two_shards_on(DataPath::Copy, [](EngineConfig& c) { c.splice.pipe_size = 64 * 1024; })};
    ASSERT_TRUE(c.server);
    constexpr std::size_t kUpload = kStuckUpload;
    const std::vector<std::byte> upload = bytes(kUpload, 'x');
    std::thread sender;
    const OpenConnection before = stall_an_upload(c, upload, sender);

    const ChangeResult asked = c.proxy.engine().move_connection(before.id, 1 - before.shard, 300ms);
    ASSERT_TRUE(asked.ok) << asked.error;
    EXPECT_TRUE(eventually([&] { return c.proxy.stats().moves_given_up == 1; }, Deadline{5s}));
    std::optional<OpenConnection> after = find(c.proxy.engine(), before.id);
    ASSERT_TRUE(after);
    EXPECT_EQ(after->shard, before.shard);
    EXPECT_EQ(c.proxy.stats().moved_out, 0u);

    std::vector<std::byte> got(kUpload);
    EXPECT_EQ(recv_all(c.server.get(), got, Deadline{30s}).status, IoStatus::Ok);
    sender.join();
    EXPECT_EQ(got, upload);
    exchange_once(c.client.get(), c.server.get(), 10, 10); // and it goes on, both ways
}

// A route at its max_connections (a third client waits in the backlog): a connection
// that moves takes its unit of the limit along and goes on at once on the other shard,
// rather than waiting for room like a new client; the waiting one still waits.
TEST(ShardMove, AConnectionOfAFullRouteMovesWithItsUnitOfTheLimit) {
    EchoServer echo;
    RouteConfig r = route_to(echo.endpoint());
    r.max_connections = 2;
    ProxyUnderTest proxy{{r}, two_shards()};
    auto echoes = [](int fd, char fill) {
        std::vector<std::byte> ping = bytes(64, fill);
        std::vector<std::byte> back(ping.size());
        return send_all(fd, ping, Deadline{5s}).status == IoStatus::Ok &&
               recv_all(fd, back, Deadline{5s}).status == IoStatus::Ok && back == ping;
    };
    UniqueFd a = connect_to(proxy.endpoint());
    UniqueFd b = connect_to(proxy.endpoint());
    ASSERT_TRUE(echoes(a.get(), 'a'));
    ASSERT_TRUE(echoes(b.get(), 'b'));
    UniqueFd waiting = connect_to(proxy.endpoint()); // in the backlog: the route is full
    std::vector<OpenConnection> open = proxy.engine().connections();
    ASSERT_EQ(open.size(), 2u);
    for (const OpenConnection& c : open)
        ASSERT_TRUE(moves_to(proxy.engine(), c.id, 1 - c.shard));
    EXPECT_TRUE(echoes(a.get(), 'c'));
    EXPECT_TRUE(echoes(b.get(), 'd'));
    EXPECT_EQ(proxy.engine().connections().size(), 2u); // the third still waits
    a.reset();                                          // room: the waiting client comes in
    EXPECT_TRUE(echoes(waiting.get(), 'e'));
}

TEST(ShardMove, RebalanceEvensOutTheShards) {
    EchoServer echo;
    ProxyUnderTest proxy{{route_to(echo.endpoint())}, two_shards()};
    constexpr std::size_t kConnections = 16;
    std::vector<UniqueFd> clients;
    for (std::size_t i = 0; i < kConnections; ++i) {
        clients.push_back(connect_to(proxy.endpoint()));
        std::vector<std::byte> ping = bytes(1 + i, 'p');
        ASSERT_EQ(send_all(clients.back().get(), ping, Deadline{5s}).status, IoStatus::Ok);
        ASSERT_EQ(recv_all(clients.back().get(), ping, Deadline{5s}).status, IoStatus::Ok);
    }
    // All on shard 0 first, however the kernel spread them.
    ASSERT_TRUE(eventually([&] { return proxy.engine().connections().size() == kConnections; },
                           Deadline{5s}));
    for (const OpenConnection& c : proxy.engine().connections()) {
        if (c.shard != 0) {
            ASSERT_TRUE(moves_to(proxy.engine(), c.id, 0));
        }
    }

    auto on_shard = [&](unsigned shard) {
        std::size_t n = 0;
        for (const OpenConnection& c : proxy.engine().connections())
            n += c.shard == shard ? 1 : 0;
        return n;
    };
    const auto asked = std::chrono::steady_clock::now();
    EXPECT_EQ(proxy.engine().rebalance(), kConnections / 2);
    EXPECT_TRUE(eventually([&] { return on_shard(1) == kConnections / 2; }, Deadline{5s}))
        << on_shard(1) << " on shard 1";
    std::printf("[ move ] %zu idle connections moved in %lld us\n", kConnections / 2,
                static_cast<long long>(std::chrono::duration_cast<std::chrono::microseconds>(
                                           std::chrono::steady_clock::now() - asked)
                                           .count()));
    EXPECT_EQ(on_shard(0), kConnections / 2);
    EXPECT_EQ(proxy.engine().rebalance(), 0u); // even now
    for (std::size_t i = 0; i < kConnections; ++i) {
        std::vector<std::byte> ping = bytes(100 + i, 'q');
        ASSERT_EQ(send_all(clients[i].get(), ping, Deadline{5s}).status, IoStatus::Ok);
        ASSERT_EQ(recv_all(clients[i].get(), ping, Deadline{5s}).status, IoStatus::Ok);
    }
}

// rebalance_above: nobody asks, and the engine evens out shards that drifted apart by
// more than that (here, every connection moved to shard 0).
TEST(ShardMove, RebalanceAboveEvensOutTheShardsOnItsOwn) {
    EchoServer echo;
    ProxyUnderTest proxy{{route_to(echo.endpoint())}, [](EngineConfig& c) {
                             c.placement.shards = 2;
                             c.rebalance_above = 3;
                         }};
    constexpr std::size_t kConnections = 10;
    std::vector<UniqueFd> clients;
    for (std::size_t i = 0; i < kConnections; ++i) {
        clients.push_back(connect_to(proxy.endpoint()));
        std::vector<std::byte> ping = bytes(10, 'r');
        ASSERT_EQ(send_all(clients.back().get(), ping, Deadline{5s}).status, IoStatus::Ok);
        ASSERT_EQ(recv_all(clients.back().get(), ping, Deadline{5s}).status, IoStatus::Ok);
    }
    ASSERT_TRUE(eventually([&] { return proxy.engine().connections().size() == kConnections; },
                           Deadline{5s}));
    std::size_t to_zero = 0;
    for (const OpenConnection& c : proxy.engine().connections())
        if (c.shard != 0 && proxy.engine().move_connection(c.id, 0).ok)
            ++to_zero;
    // Once those moves are in, all 10 are on shard 0, and only the rebalancer moves any
    // back: at least 5 of them before the shards are even (0 or 1 apart), within a few
    // of its one-second looks.
    auto spread = [&] {
        std::size_t on0 = 0;
        std::vector<OpenConnection> open = proxy.engine().connections();
        for (const OpenConnection& c : open)
            on0 += c.shard == 0 ? 1 : 0;
        const std::size_t on1 = open.size() - on0;
        return on0 > on1 ? on0 - on1 : on1 - on0;
    };
    EXPECT_TRUE(eventually([&] { return proxy.stats().moved_in >= to_zero + 5 && spread() <= 1; },
                           Deadline{10s}))
        << "spread " << spread() << ", moved " << proxy.stats().moved_in;
    for (std::size_t i = 0; i < kConnections; ++i) {
        std::vector<std::byte> ping = bytes(50, 'z');
        ASSERT_EQ(send_all(clients[i].get(), ping, Deadline{5s}).status, IoStatus::Ok);
        ASSERT_EQ(recv_all(clients[i].get(), ping, Deadline{5s}).status, IoStatus::Ok);
    }
}

} // namespace
} // namespace uringfwd::test
