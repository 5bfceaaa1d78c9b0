// A FIN closes one direction only: the other keeps flowing until its own FIN. The
// proxy must pass each FIN on (shutdown, not close) and keep the opposite direction.
#include "tests/support/exchange.hpp"
#include "tests/support/proxy_under_test.hpp"
#include "tests/support/scripted_peer.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/transfer_checks.hpp"

#include <gtest/gtest.h>

#include <chrono>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kMiB = 1024 * 1024;

// The client sends a request and FINs (like `nc -N`); the reply is produced only after
// the server has seen that FIN, and must still reach the client in full.
TEST(HalfClose, ClientShutsWriteThenStillReceives4MiB) {
    ExchangePlan responder;
    responder.order = ExchangePlan::Order::ReceiveFirst;
    responder.send_bytes = 4 * kMiB;
    responder.send_seed = 41;
    ScriptedPeer peer{responder};
    ProxyUnderTest proxy{peer.endpoint()};

    UniqueFd client = connect_to(proxy.endpoint());
    ExchangePlan request;
    request.send_bytes = 64 * 1024;
    request.send_seed = 42;
    const ExchangeResult mine = exchange(client, request, Deadline{30s});
    EXPECT_TRUE(BothWaysIntact(mine, request, peer, responder));
}

// The mirror image: the upstream speaks first and FINs; the client reads to EOF and
// only then sends its data, which the upstream must still receive.
TEST(HalfClose, UpstreamShutsWriteThenStillReceives4MiB) {
    const ExchangePlan speaker = source_plan(kMiB, 51);
    ScriptedPeer peer{speaker};
    ProxyUnderTest proxy{peer.endpoint()};

    UniqueFd client = connect_to(proxy.endpoint());
    ExchangePlan late_sender;
    late_sender.order = ExchangePlan::Order::ReceiveFirst;
    late_sender.send_bytes = 4 * kMiB;
    late_sender.send_seed = 52;
    const ExchangeResult mine = exchange(client, late_sender, Deadline{30s});
    EXPECT_TRUE(BothWaysIntact(mine, late_sender, peer, speaker));
}

} // namespace
} // namespace uringfwd::test
