// Faults: one end of a busy connection dies. The other end must learn of it promptly
// (reset or EOF within a second or two), never keep waiting on a connection that is
// gone, and never see bytes that were not sent.
#include "tests/hardening/forked_echo_server.hpp"
#include "tests/support/binary_process.hpp"
#include "tests/support/scripted_peer.hpp"
#include "tests/support/transfer_checks.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;
using Seconds = std::chrono::duration<double>;

constexpr uint64_t kLarge = 512 * 1024 * 1024; // more than moves before the fault

// (c) The upstream process is SIGKILLed while echoing a stream back: its kernel resets
// its sockets, and the proxy must pass that on to the client.
TEST(FaultPeerDeath, UpstreamKilledMidTransferEndsClientPromptly) {
    ForkedEchoServer upstream{listen_loopback(Family::Inet4)};
    RunningBinary fwd = start_binary("127.0.0.1:0", upstream.endpoint());
    UniqueFd client = connect_to(fwd.endpoint);

    ExchangePlan plan;
    plan.send_bytes = kLarge;
    plan.send_seed = 77;
    const auto start = Clock::now();
    auto running =
        std::async(std::launch::async, [&] { return exchange(client, plan, Deadline{30s}); });
    std::this_thread::sleep_for(500ms); // well into the transfer
    ASSERT_EQ(upstream.accepted(), 1u);
    const auto killed_at = Clock::now();
    upstream.kill();
    ASSERT_EQ(running.wait_for(10s), std::future_status::ready)
        << "the client still waits 10 s after its upstream died";
    const ExchangeResult r = running.get();
    const double after_kill = Seconds(start + r.elapsed - killed_at).count();
    std::printf("received %llu bytes, ended %.3f s after the kill: %s\n",
                static_cast<unsigned long long>(r.received), after_kill, r.describe().c_str());
    EXPECT_TRUE(EndedByPeer(r));
    EXPECT_LT(after_kill, 2.0);
    EXPECT_GT(r.received, 0u);
    EXPECT_LT(r.sent, kLarge);
    // The echo is the client's own payload: whatever came back is an intact prefix.
    EXPECT_TRUE(ReceivedPrefixOf(r, plan.send_seed));
}

// (d) The client resets while sending: the upstream, busy reading, must see the
// connection end promptly, having received an intact prefix.
TEST(FaultPeerDeath, ClientResetWhileSendingEndsUpstreamPromptly) {
    ScriptedPeer upstream{sink_plan()};
    RunningBinary fwd = start_binary("127.0.0.1:0", upstream.endpoint());
    UniqueFd client = connect_to(fwd.endpoint);
    ExchangePlan plan;
    plan.send_bytes = kLarge;
    plan.send_seed = 78;
    plan.abort_after_sent = 64 * 1024 * 1024;
    const ExchangeResult mine = exchange(client, plan, Deadline{30s});
    const auto aborted_at = Clock::now();
    ASSERT_TRUE(mine.aborted) << mine.describe();

    const auto theirs = upstream.wait_result(Deadline{10s});
    ASSERT_TRUE(theirs.has_value()) << "the upstream still waits 10 s after the client reset";
    const double after = Seconds(Clock::now() - aborted_at).count();
    std::printf("upstream got %llu bytes, ended %.3f s after the reset: %s\n",
                static_cast<unsigned long long>(theirs->received), after,
                theirs->describe().c_str());
    EXPECT_TRUE(EndedByPeer(*theirs));
    EXPECT_LT(after, 2.0);
    EXPECT_LE(theirs->received, mine.sent);
    EXPECT_TRUE(ReceivedPrefixOf(*theirs, plan.send_seed));
}

// (d') The client resets while the upstream is sending to it and it has stopped
// reading, so the proxy holds undelivered bytes for it: the upstream must still learn
// promptly that its peer is gone.
TEST(FaultPeerDeath, ClientResetWhileReceivingEndsUpstreamPromptly) {
    ScriptedPeer upstream{source_plan(kLarge, 79)};
    RunningBinary fwd = start_binary("127.0.0.1:0", upstream.endpoint());
    UniqueFd client = connect_to(fwd.endpoint);
    ExchangePlan plan; // sends nothing
    plan.shutdown_write_after_send = false;
    plan.abort_after_received = 8 * 1024 * 1024;
    const ExchangeResult mine = exchange(client, plan, Deadline{30s});
    ASSERT_TRUE(mine.aborted) << mine.describe();
    const auto aborted_at = Clock::now();

    const auto theirs = upstream.wait_result(Deadline{10s});
    ASSERT_TRUE(theirs.has_value()) << "the upstream still sends 10 s after the client reset";
    const double after = Seconds(Clock::now() - aborted_at).count();
    std::printf("upstream sent %llu bytes, ended %.3f s after the reset: %s\n",
                static_cast<unsigned long long>(theirs->sent), after, theirs->describe().c_str());
    EXPECT_TRUE(EndedByPeer(*theirs));
    EXPECT_LT(after, 2.0);
    EXPECT_TRUE(ReceivedPrefixOf(mine, 79));
}

} // namespace
} // namespace uringfwd::test
