// The copy path's bulk buffers (data_path copy): a direction that fills two small
// buffers in a row receives into the large ones, several at once with receive bundles
// where the kernel has them. Every byte arrives once and in order both ways, FINs and
// resets pass, a slow reader gets everything, directions that find the bulk buffers
// all out fall back to the small ones, and every buffer comes back.
#include "tests/support/exchange.hpp"
#include "tests/support/proc_stats.hpp"
#include "tests/support/proxy_under_test.hpp"
#include "tests/support/scripted_peer.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/transfer_checks.hpp"
#include "uring/ring.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kMiB = 1024 * 1024;

ConfigEdit copy_with_bulk(unsigned bulk_buffers = 16, std::size_t size = 256 * 1024) {
    return [bulk_buffers, size](EngineConfig& c) {
        c.data_path = DataPath::Copy;
        c.copy.bulk_buffers = bulk_buffers;
        c.copy.bulk_buffer_size = size;
    };
}

bool kernel_has_bundles() {
    uring::Ring ring(8);
    return ring.features().recvsend_bundle;
}

// Once every connection is gone, nothing is held: no connection and no buffer.
::testing::AssertionResult settles(ProxyUnderTest& proxy) {
    auto settled = [&] {
        EngineStats s = proxy.stats();
        return s.active == 0 && s.buffers_out == 0;
    };
    if (eventually(settled, Deadline{5s}))
        return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "still held after 5 s: " << proxy.stats().to_line();
}

// Both directions bulk at once: each side sends 24 MiB while it receives 24 MiB.
TEST(BulkBuffers, DuplexStreamsArriveIntactThroughBulkBuffersAndBundles) {
    ExchangePlan upstream;
    upstream.send_bytes = 24 * kMiB;
    upstream.send_seed = 11;
    ScriptedPeer peer{upstream};
    ProxyUnderTest proxy{peer.endpoint(), copy_with_bulk()};

    UniqueFd client = connect_to(proxy.endpoint());
    ExchangePlan mine_plan;
    mine_plan.send_bytes = 24 * kMiB;
    mine_plan.send_seed = 12;
    const ExchangeResult mine = exchange(client, mine_plan, Deadline{30s});
    EXPECT_TRUE(BothWaysIntact(mine, mine_plan, peer, upstream));

    EngineStats s = proxy.stats();
    EXPECT_GT(s.bulk_receives, 0u) << s.to_line();
    EXPECT_EQ(s.splices, 0u) << s.to_line();
    if (kernel_has_bundles()) {
        EXPECT_GT(s.bundles, 0u) << "no receive filled more than one bulk buffer: " << s.to_line();
    }
    client.reset();
    EXPECT_TRUE(settles(proxy));
}

// A FIN each way, after bulk in each way: the client sends 8 MiB and FINs; the upstream
// answers 8 MiB only after that FIN.
TEST(BulkBuffers, HalfCloseEachWayAfterBulk) {
    ExchangePlan responder;
    responder.order = ExchangePlan::Order::ReceiveFirst;
    responder.send_bytes = 8 * kMiB;
    responder.send_seed = 21;
    ScriptedPeer peer{responder};
    ProxyUnderTest proxy{peer.endpoint(), copy_with_bulk()};

    UniqueFd client = connect_to(proxy.endpoint());
    ExchangePlan request;
    request.send_bytes = 8 * kMiB;
    request.send_seed = 22;
    const ExchangeResult mine = exchange(client, request, Deadline{30s});
    EXPECT_TRUE(BothWaysIntact(mine, request, peer, responder));
    EXPECT_GT(proxy.stats().bulk_receives, 0u) << proxy.stats().to_line();
    client.reset();
    EXPECT_TRUE(settles(proxy));
}

// The upstream resets part-way through a bulk transfer: the client sees the stream
// end early (reset or EOF), with an intact prefix, and the buffers the direction held
// come back.
TEST(BulkBuffers, UpstreamResetMidBulkReachesTheClient) {
    ExchangePlan upstream = source_plan(64 * kMiB, 31);
    upstream.abort_after_sent = 8 * kMiB;
    ScriptedPeer peer{upstream};
    ProxyUnderTest proxy{peer.endpoint(), copy_with_bulk()};

    UniqueFd client = connect_to(proxy.endpoint());
    ExchangePlan reader; // sends nothing, reads everything
    const ExchangeResult mine = exchange(client, reader, Deadline{30s});
    EXPECT_TRUE(EndedByPeer(mine));
    EXPECT_TRUE(ReceivedPrefixOf(mine, 31));
    EXPECT_LT(mine.received, 64 * kMiB) << mine.describe();
    client.reset();
    EXPECT_TRUE(settles(proxy));
    EXPECT_GE(proxy.stats().closed_upstream_reset, 1u) << proxy.stats().to_line();
}

// The client resets part-way through its upload: the upstream sees its stream cut with
// an intact prefix.
TEST(BulkBuffers, ClientResetMidBulkReachesTheUpstream) {
    ScriptedPeer peer{sink_plan()};
    ProxyUnderTest proxy{peer.endpoint(), copy_with_bulk()};

    UniqueFd client = connect_to(proxy.endpoint());
    ExchangePlan uploader;
    uploader.send_bytes = 64 * kMiB;
    uploader.send_seed = 41;
    uploader.abort_after_sent = 8 * kMiB;
    const ExchangeResult mine = exchange(client, uploader, Deadline{30s});
    EXPECT_TRUE(mine.aborted) << mine.describe();
    const auto theirs = peer.wait_result(Deadline{10s});
    ASSERT_TRUE(theirs.has_value());
    EXPECT_TRUE(EndedByPeer(*theirs));
    EXPECT_TRUE(ReceivedPrefixOf(*theirs, 41));
    EXPECT_LT(theirs->received, 64 * kMiB) << theirs->describe();
    client.reset();
    EXPECT_TRUE(settles(proxy));
}

// A client that waits, then reads slowly: the proxy's sends to it come back short or
// wait for room, the bulk buffers stay held meanwhile, and every byte still arrives.
TEST(BulkBuffers, SlowReaderGetsEveryByteInOrder) {
    ScriptedPeer peer{source_plan(16 * kMiB, 51)};
    ProxyUnderTest proxy{peer.endpoint(), copy_with_bulk()};

    UniqueFd client = connect_to(proxy.endpoint());
    ExchangePlan slow;
    slow.read_delay = 200ms;
    slow.read_chunk = 16 * 1024;
    slow.read_bytes_per_sec = 48 * kMiB;
    const ExchangeResult mine = exchange(client, slow, Deadline{30s});
    EXPECT_TRUE(ReceivedPayload(mine, 51, 16 * kMiB));
    EXPECT_GT(proxy.stats().bulk_receives, 0u) << proxy.stats().to_line();
    client.reset();
    EXPECT_TRUE(settles(proxy));
}

// Two bulk buffers for eight bulk streams: directions that find them all out go back
// to the small buffers (and come back later); nothing is lost or reordered.
TEST(BulkBuffers, FewBulkBuffersAreSharedAndRunningOutFallsBackToSmallOnes) {
    constexpr std::size_t kStreams = 8;
    ScriptedPeer peer{source_plan(4 * kMiB, 61)};
    ProxyUnderTest proxy{peer.endpoint(), copy_with_bulk(/*bulk_buffers=*/2, 64 * 1024)};

    std::vector<UniqueFd> clients;
    for (std::size_t i = 0; i < kStreams; ++i)
        clients.push_back(connect_to(proxy.endpoint()));
    std::vector<ExchangeResult> results(kStreams);
    std::vector<std::thread> readers;
    for (std::size_t i = 0; i < kStreams; ++i)
        readers.emplace_back([&, i] { results[i] = exchange(clients[i], {}, Deadline{30s}); });
    for (std::thread& t : readers)
        t.join();
    for (std::size_t i = 0; i < kStreams; ++i)
        EXPECT_TRUE(ReceivedPayload(results[i], 61, 4 * kMiB)) << "stream " << i;
    EngineStats s = proxy.stats();
    EXPECT_GT(s.bulk_receives, 0u) << s.to_line();
    clients.clear();
    EXPECT_TRUE(settles(proxy));
}

// A bulk buffer count the kernel's ring or a direction could not hold is a start error.
TEST(BulkBuffers, CountMustBeZeroOrAPowerOfTwoUpTo16) {
    for (unsigned bad : {3u, 32u}) {
        EngineConfig config;
        config.listen = loopback_any_port();
        config.upstream = Endpoint::parse("127.0.0.1:9");
        config.data_path = DataPath::Copy;
        config.copy.bulk_buffers = bad;
        try {
            Engine::start(config);
            ADD_FAILURE() << "started with " << bad << " bulk buffers";
        } catch (const StartError& e) {
            EXPECT_NE(std::string(e.what()).find("bulk_buffers"), std::string::npos) << e.what();
        }
    }
}

} // namespace
} // namespace uringfwd::test
