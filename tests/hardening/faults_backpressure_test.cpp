// Fault: an upstream that accepts and never reads. The proxy must stop reading from the
// client once its pipe and the sockets' buffers are full (backpressure), not buffer the
// client's bytes in memory; and the stalled connection must be cleaned up completely
// once the client gives up.
#include "tests/hardening/binary_probe.hpp"
#include "tests/support/binary_process.hpp"
#include "tests/support/exchange.hpp"
#include "tests/support/proc_stats.hpp"
#include "tests/support/scripted_peer.hpp"
#include "tests/support/sockets.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kPush = 256ull * 1024 * 1024;
constexpr uint64_t kMaxGrowth = 64ull * 1024 * 1024;

struct PushOutcome {
    uint64_t sent = 0;
    uint64_t sent_in_last_second = 0;
    uint64_t peak_rss = 0;
};

// The binary's counters once no connection is open and no pipe leased, or the last ones
// read when that did not happen within 5 s. Called after the fd count has reached its
// floor, which can come a moment before the shard has finished the connection's
// bookkeeping (its pipe closes first); the counters follow at once.
std::optional<Counters> wait_until_no_connection(BinaryProcess& process) {
    std::optional<Counters> last;
    eventually(
        [&] {
            last = request_totals(process, Deadline{5s});
            return last && last->at("active") == 0 && last->at("pipes_leased") == 0;
        },
        Deadline{5s});
    return last;
}

// Sends up to kPush bytes without blocking for `duration`, sampling the binary's RSS.
PushOutcome push_for(int fd, pid_t binary, Clock::duration duration) {
    PushOutcome out;
    std::vector<char> chunk(1024 * 1024, 'x');
    const auto start = Clock::now();
    const auto last_second = start + duration - 1s;
    while (out.sent < kPush && Clock::now() - start < duration) {
        pollfd p{fd, POLLOUT, 0};
        if (::poll(&p, 1, 100) == 1) {
            const std::size_t want = std::min<uint64_t>(chunk.size(), kPush - out.sent);
            const ssize_t n = ::send(fd, chunk.data(), want, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (n > 0) {
                out.sent += static_cast<uint64_t>(n);
                if (Clock::now() >= last_second) {
                    out.sent_in_last_second += static_cast<uint64_t>(n);
                }
            } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
                break;
            }
        }
        out.peak_rss = std::max(out.peak_rss, resident_bytes(binary));
    }
    return out;
}

class FaultBackpressure : public ::testing::TestWithParam<bool> {};

// The client pushes for 4 s into a connection whose upstream never reads, then closes:
// with an RST (param true) or a FIN (false). A FIN only promises no more data: the proxy
// still owes the upstream the bytes it holds, so that connection ends when the upstream
// goes away.
TEST_P(FaultBackpressure, StalledUpstreamBoundsMemoryAndCleansUp) {
    const bool reset = GetParam();
    auto upstream = std::make_unique<SilentServer>();
    RunningBinary fwd = start_binary("127.0.0.1:0", upstream->endpoint(), {"--shards", "1"});
    const pid_t pid = fwd.process->pid();
    const int fds_before = count_open_fds(pid);
    const uint64_t rss_before = resident_bytes(pid);

    UniqueFd client = connect_to(fwd.endpoint);
    ASSERT_TRUE(eventually([&] { return upstream->accepted() == 1; }, Deadline{5s}));
    const PushOutcome push = push_for(client.get(), pid, 4s);
    const auto totals = request_totals(*fwd.process, Deadline{5s});
    ASSERT_TRUE(totals.has_value());
    std::printf("pushed %.1f MiB (%.1f MiB in the last second); binary RSS %.1f -> peak %.1f "
                "MiB; bytes_to_upstream=%llu pipes_leased=%llu\n",
                push.sent / 1048576.0, push.sent_in_last_second / 1048576.0, rss_before / 1048576.0,
                push.peak_rss / 1048576.0,
                static_cast<unsigned long long>(totals->at("bytes_to_upstream")),
                static_cast<unsigned long long>(totals->at("pipes_leased")));
    EXPECT_LT(push.sent, kPush) << "nothing held the client back";
    EXPECT_EQ(push.sent_in_last_second, 0u) << "still accepting data after 3 s of stall";
    EXPECT_LT(push.peak_rss, rss_before + kMaxGrowth);
    EXPECT_EQ(totals->at("active"), 1u);

    if (reset) {
        // Nothing is left to deliver to a client that reset, and the bytes it sent are
        // void: the proxy must drop the connection now, even though its client->upstream
        // direction is parked waiting for the upstream to make room.
        abortive_close(client);
    } else {
        client.reset();
        // Held on purpose (see above) until the upstream closes.
        std::this_thread::sleep_for(500ms);
        const auto held = request_totals(*fwd.process, Deadline{5s});
        ASSERT_TRUE(held.has_value());
        EXPECT_EQ(held->at("active"), 1u) << "dropped bytes it still owed the upstream";
        upstream.reset();
    }
    EXPECT_TRUE(eventually([&] { return count_open_fds(pid) <= fds_before; }, Deadline{5s}))
        << "fds " << fds_before << " before, " << count_open_fds(pid) << " after";
    const std::optional<Counters> after = wait_until_no_connection(*fwd.process);
    ASSERT_TRUE(after.has_value());
    EXPECT_EQ(after->at("active"), 0u);
    EXPECT_EQ(after->at("pipes_leased"), 0u);
    std::printf("fds %d before, %d after; pipes_closed_dirty=%llu\n", fds_before,
                count_open_fds(pid),
                static_cast<unsigned long long>(after->at("pipes_closed_dirty")));
}

INSTANTIATE_TEST_SUITE_P(CloseBy, FaultBackpressure, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& info) {
                             return std::string(info.param ? "Reset" : "Fin");
                         });

// The mirror image, for the engine's other side: the client stops reading, the
// upstream fills everything between them and then resets. The proxy holds bytes for the
// client that can never be completed, and nothing more can come from the upstream: the
// connection must be dropped promptly, not kept until the client reads.
TEST(FaultBackpressureMirror, UpstreamResetWhileClientStalledCleansUp) {
    Listener upstream_listener = listen_loopback(Family::Inet4);
    RunningBinary fwd =
        start_binary("127.0.0.1:0", upstream_listener.endpoint(), {"--shards", "1"});
    const pid_t pid = fwd.process->pid();
    const int fds_before = count_open_fds(pid);

    UniqueFd client = connect_to(fwd.endpoint); // never reads
    UniqueFd upstream = accept_one(upstream_listener.fd(), Deadline{5s});
    const PushOutcome push = push_for(upstream.get(), pid, 3s);
    std::printf("upstream pushed %.1f MiB before the stall\n", push.sent / 1048576.0);
    EXPECT_EQ(push.sent_in_last_second, 0u);
    abortive_close(upstream);

    EXPECT_TRUE(eventually([&] { return count_open_fds(pid) <= fds_before; }, Deadline{5s}))
        << "fds " << fds_before << " before, " << count_open_fds(pid) << " after";
    const std::optional<Counters> after = wait_until_no_connection(*fwd.process);
    ASSERT_TRUE(after.has_value());
    EXPECT_EQ(after->at("active"), 0u);
    EXPECT_EQ(after->at("pipes_leased"), 0u);
}

// What a connection kept after its client reset costs the others: its pipe. With a pool
// of two pipes, two clients that reset while their upstreams stall must not leave a
// third, healthy connection on the same shard waiting for a pipe.
TEST(FaultBackpressureMirror, ResetClientsOfStalledUpstreamsDoNotStarveOthers) {
    ExchangePlan stalled = sink_plan();
    stalled.read_delay = 30s; // reads nothing while the test runs
    ScriptedPeer upstream{std::vector<ExchangePlan>{stalled, stalled, sink_plan()}};
    RunningBinary fwd =
        start_binary("127.0.0.1:0", upstream.endpoint(), {"--shards", "1", "--max-pipes", "2"});
    for (int i = 0; i < 2; ++i) {
        UniqueFd client = connect_to(fwd.endpoint);
        ASSERT_TRUE(eventually([&] { return upstream.accepted() == static_cast<uint64_t>(i + 1); },
                               Deadline{5s}));
        const PushOutcome push = push_for(client.get(), fwd.process->pid(), 2s);
        EXPECT_EQ(push.sent_in_last_second, 0u);
        abortive_close(client);
    }
    constexpr uint64_t kSize = 1024 * 1024;
    UniqueFd client = connect_to(fwd.endpoint);
    const ExchangeResult mine = exchange(client, source_plan(kSize, 90), Deadline{5s});
    const auto totals = request_totals(*fwd.process, Deadline{5s});
    ASSERT_TRUE(totals.has_value());
    std::printf("healthy connection: %s; active=%llu pipes_leased=%llu pipe_waits=%llu\n",
                mine.describe().c_str(), static_cast<unsigned long long>(totals->at("active")),
                static_cast<unsigned long long>(totals->at("pipes_leased")),
                static_cast<unsigned long long>(totals->at("pipe_waits")));
    EXPECT_TRUE(mine.send_status == IoStatus::Ok && mine.recv_status == IoStatus::Eof)
        << "starved of pipes by dead connections: " << mine.describe();
}

} // namespace
} // namespace uringfwd::test
