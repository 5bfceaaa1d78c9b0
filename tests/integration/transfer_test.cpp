// Bytes arrive intact and in order, in each direction and both at once, for sizes from
// empty to many pipe-fulls, through an in-process engine.
#include "tests/support/exchange.hpp"
#include "tests/support/payload.hpp"
#include "tests/support/proxy_under_test.hpp"
#include "tests/support/scripted_peer.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/transfer_checks.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kMiB = 1024 * 1024;

class TransferSize : public ::testing::TestWithParam<uint64_t> {};

TEST_P(TransferSize, ClientToUpstream) {
    const uint64_t size = GetParam();
    ScriptedPeer sink{sink_plan()};
    ProxyUnderTest proxy{sink.endpoint()};

    UniqueFd client = connect_to(proxy.endpoint());
    ExchangePlan plan;
    plan.send_bytes = size;
    plan.send_seed = 7;
    const ExchangeResult mine = exchange(client, plan, Deadline{60s});

    EXPECT_TRUE(SentAll(mine, size));
    // The sink FINs only after our FIN reached it, so EOF here means it saw everything.
    EXPECT_TRUE(ReceivedPayload(mine, 0, 0));
    const auto theirs = sink.wait_result(Deadline{10s});
    ASSERT_TRUE(theirs.has_value()) << "the sink never finished";
    EXPECT_TRUE(ReceivedPayload(*theirs, 7, size));
}

TEST_P(TransferSize, UpstreamToClient) {
    const uint64_t size = GetParam();
    ScriptedPeer source{source_plan(size, 11)};
    ProxyUnderTest proxy{source.endpoint()};

    UniqueFd client = connect_to(proxy.endpoint());
    const ExchangeResult mine = exchange(client, sink_plan(), Deadline{60s});

    EXPECT_TRUE(ReceivedPayload(mine, 11, size));
    const auto theirs = source.wait_result(Deadline{10s});
    ASSERT_TRUE(theirs.has_value()) << "the source never finished";
    EXPECT_TRUE(SentAll(*theirs, size));
    EXPECT_TRUE(ReceivedPayload(*theirs, 0, 0));
}

INSTANTIATE_TEST_SUITE_P(Sizes, TransferSize,
                         ::testing::Values(0, 1, 1460, 64 * 1024, kMiB + 7, 64 * kMiB),
                         [](const ::testing::TestParamInfo<uint64_t>& info) {
                             return std::to_string(info.param) + "_bytes";
                         });

// Both directions busy at the same time: each side sends its own stream while reading
// the other's, so neither direction may wait for the other to drain.
TEST(Transfer, FullDuplex32MiBEachWay) {
    constexpr uint64_t kSize = 32 * kMiB;
    ExchangePlan upstream_plan;
    upstream_plan.send_bytes = kSize;
    upstream_plan.send_seed = 21;
    ScriptedPeer peer{upstream_plan};
    ProxyUnderTest proxy{peer.endpoint()};

    UniqueFd client = connect_to(proxy.endpoint());
    ExchangePlan client_plan;
    client_plan.send_bytes = kSize;
    client_plan.send_seed = 22;
    const ExchangeResult mine = exchange(client, client_plan, Deadline{60s});
    EXPECT_TRUE(BothWaysIntact(mine, client_plan, peer, upstream_plan));
}

// Protocols such as SMTP or SSH: the server talks before the client has sent a byte,
// so the proxy must be reading the upstream from the start, not only after client data.
TEST(Transfer, ServerSpeaksFirst) {
    constexpr uint64_t kGreeting = 1000;
    ExchangePlan greeter = source_plan(kGreeting, 31);
    greeter.shutdown_write_after_send = false; // greet, then keep the connection open
    ScriptedPeer peer{greeter};
    ProxyUnderTest proxy{peer.endpoint()};

    UniqueFd client = connect_to(proxy.endpoint());
    std::vector<std::byte> greeting(kGreeting);
    const IoResult got = recv_all(client.get(), greeting, Deadline{5s});
    ASSERT_EQ(got.status, IoStatus::Ok)
        << "greeting not received: " << to_string(got.status) << " after " << got.bytes << " bytes";
    EXPECT_EQ(greeting, Payload{31}.bytes(0, kGreeting));

    // Now answer; the peer closes after reading our FIN, which ends our read with EOF.
    ExchangePlan reply;
    reply.send_bytes = kMiB;
    reply.send_seed = 32;
    const ExchangeResult mine = exchange(client, reply, Deadline{30s});
    EXPECT_TRUE(SentAll(mine, kMiB));
    EXPECT_TRUE(ReceivedPayload(mine, 0, 0));
    const auto theirs = peer.wait_result(Deadline{10s});
    ASSERT_TRUE(theirs.has_value());
    EXPECT_TRUE(ReceivedPayload(*theirs, 32, kMiB));
}

} // namespace
} // namespace uringfwd::test
