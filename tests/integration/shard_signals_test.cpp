// A shard thread must not let SIGPIPE kill the process it is embedded in: an inline
// splice(2) into a socket whose peer has gone raises it in the calling thread
// (splice_to_socket sends without MSG_NOSIGNAL, fs/splice.c; sk_stream_error sends the
// signal for an EPIPE, net/core/stream.c), and its default action ends the process.
// engine/api/engine.cpp blocks it on every shard thread. Run in a child process (a death
// test, re-executed so that it starts with no other thread) whose SIGPIPE has its default
// disposition, as an embedder's may.
#include "tests/support/eventually.hpp"
#include "tests/support/exchange.hpp"
#include "tests/support/proxy_under_test.hpp"
#include "tests/support/scripted_peer.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"

#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <span>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kMiB = 1024 * 1024;

// Clients that send a byte and close at once, with nothing left to read, so their close
// is a FIN. The engine passes it on; only then does the upstream (ReceiveFirst) send its
// 16 MiB, which the engine splices into a client socket whose peer has gone: the client's
// kernel answers the first segment with a reset (net/ipv4/tcp_input.c
// tcp_rcv_state_process: data after close in FIN_WAIT), which in CLOSE_WAIT sets EPIPE
// as the socket's error (tcp_reset), so the next splice into it raises SIGPIPE. Without
// the engine's mask this killed the child in 5 runs of 5. True once every upstream has answered and
// the engine has closed every connection.
bool clients_gone_before_the_upstream_answers() {
    constexpr int kClients = 20;
    ExchangePlan answer;
    answer.order = ExchangePlan::Order::ReceiveFirst;
    answer.send_bytes = 16 * kMiB;
    ScriptedPeer upstream{answer, Family::Inet4, milliseconds{20000}};
    ProxyUnderTest proxy{upstream.endpoint(), [](EngineConfig& c) {
                             c.placement.shards = 1;
                             c.data_path = DataPath::Splice;
                             c.splice.splice_mechanism = SpliceMechanism::Inline;
                         }};
    for (int c = 0; c < kClients; ++c) {
        UniqueFd fd = connect_to(proxy.endpoint());
        const char byte = 'x';
        send_all(fd.get(), std::as_bytes(std::span{&byte, 1}), Deadline{5s});
    }
    const bool answered = upstream.wait_results(kClients, Deadline{30s}).size() == kClients;
    const bool closed = eventually([&] { return proxy.stats().active == 0; }, Deadline{10s});
    return answered && closed;
}

TEST(ShardSignalsDeathTest, ClientsGoneDuringInlineSplicesDoNotKillTheProcess) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(
        {
            std::signal(SIGPIPE, SIG_DFL);
            std::_Exit(clients_gone_before_the_upstream_answers() ? 0 : 2);
        },
        ::testing::ExitedWithCode(0), "");
}

} // namespace
} // namespace uringfwd::test
