// Idle at scale: one shard holds 9000 idle proxied connections. Idle connections hold no
// pipe and park no io-wq worker, so the binary's memory, fds and threads must stay
// modest; afterwards every one of them must still forward. Slow and fd-hungry, so it
// runs only with URING_FWD_SCALE=1.
#include "tests/hardening/binary_probe.hpp"
#include "tests/hardening/forked_echo_server.hpp"
#include "tests/support/binary_process.hpp"
#include "tests/support/fd_limit.hpp"
#include "tests/support/proc_stats.hpp"

#include <gtest/gtest.h>

#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

constexpr std::size_t kConnections = 9000;
constexpr std::size_t kBatch = 500;

// Sends an 8-byte tag on each of `fds` and reads it back, a batch at a time; returns how
// many came back intact.
std::size_t echo_each(const std::vector<UniqueFd>& fds, const Deadline& deadline) {
    std::size_t good = 0;
    for (std::size_t begin = 0; begin < fds.size(); begin += kBatch) {
        const std::size_t end = std::min(fds.size(), begin + kBatch);
        std::vector<pollfd> waiting;
        for (std::size_t i = begin; i < end; ++i) {
            const uint64_t tag = i;
            if (::send(fds[i].get(), &tag, sizeof(tag), MSG_NOSIGNAL) == sizeof(tag)) {
                waiting.push_back({fds[i].get(), POLLIN, 0});
            }
        }
        std::vector<uint64_t> got(waiting.size(), 0);
        std::vector<std::size_t> have(waiting.size(), 0);
        std::size_t left = waiting.size();
        while (left > 0 && !deadline.expired()) {
            if (::poll(waiting.data(), waiting.size(), 200) <= 0) {
                continue;
            }
            for (std::size_t w = 0; w < waiting.size(); ++w) {
                if (waiting[w].fd < 0 || waiting[w].revents == 0) {
                    continue;
                }
                auto* into = reinterpret_cast<char*>(&got[w]) + have[w];
                const ssize_t n = ::recv(waiting[w].fd, into, 8 - have[w], MSG_DONTWAIT);
                if (n > 0) {
                    have[w] += static_cast<std::size_t>(n);
                }
                if (n == 0 || (n < 0 && errno != EAGAIN) || have[w] == 8) {
                    good += have[w] == 8 && got[w] == begin + w ? 1 : 0;
                    waiting[w].fd = -1;
                    --left;
                }
            }
        }
    }
    return good;
}

TEST(IdleScale, NineThousandIdleConnectionsOnOneShard) {
    const char* enabled = std::getenv("URING_FWD_SCALE");
    if (enabled == nullptr || std::string(enabled) != "1") {
        GTEST_SKIP() << "set URING_FWD_SCALE=1 to run (9000 connections, ~20000 fds)";
    }
    if (raise_fd_limit() < kConnections + 1000) {
        GTEST_SKIP() << "RLIMIT_NOFILE hard limit too low for 9000 client sockets";
    }
    // The upstream's 9000 sockets live in a child process, out of this one's fd budget.
    ForkedEchoServer upstream{listen_loopback(Family::Inet4)};
    RunningBinary fwd = start_binary("127.0.0.1:0", upstream.endpoint(), {"--shards", "1"});
    const pid_t pid = fwd.process->pid();
    const uint64_t rss_before = resident_bytes(pid);
    const int fds_before = count_open_fds(pid);

    std::vector<UniqueFd> clients;
    clients.reserve(kConnections);
    const auto start = Clock::now();
    for (std::size_t i = 0; i < kConnections; ++i) {
        clients.push_back(connect_to(fwd.endpoint, 10s));
    }
    ASSERT_TRUE(
        eventually([&] { return upstream.open_connections() == kConnections; }, Deadline{60s}))
        << upstream.open_connections() << " of " << kConnections << " reached the upstream";
    const double setup = std::chrono::duration<double>(Clock::now() - start).count();
    std::this_thread::sleep_for(2s); // let anything transient settle

    const uint64_t rss = resident_bytes(pid);
    const int fds = count_open_fds(pid);
    const int pipes = count_pipe_fds(pid);
    const int iowq = count_threads_with_prefix(pid, "iou-wrk");
    std::printf("9000 idle connections (set up in %.1f s): binary RSS %.1f MiB (%.1f before), "
                "fds %d (%d before, %d of them pipes), io-wq threads %d\n",
                setup, rss / 1048576.0, rss_before / 1048576.0, fds, fds_before, pipes, iowq);
    // With direct descriptors the sockets are slots of the shard's file table, not fds
    // (docs/kernel.md §11): count both.
    const auto totals = request_totals(*fwd.process, Deadline{5s});
    ASSERT_TRUE(totals.has_value());
    const int sockets = fds + static_cast<int>(totals->at("direct_slots"));
    std::printf("slots of the file table: %llu\n",
                static_cast<unsigned long long>(totals->at("direct_slots")));
    EXPECT_GE(sockets, static_cast<int>(2 * kConnections));
    EXPECT_LT(sockets, static_cast<int>(2 * kConnections) + 300) << "idle connections hold pipes";
    EXPECT_LT(rss, rss_before + 256ull * 1024 * 1024);

    const std::size_t good = echo_each(clients, Deadline{120s});
    EXPECT_EQ(good, kConnections);
    std::printf("%zu of %zu still forward; io-wq threads after: %d\n", good, kConnections,
                count_threads_with_prefix(pid, "iou-wrk"));
    clients.clear();
    EXPECT_TRUE(eventually([&] { return count_open_fds(pid) < fds_before + 300; }, Deadline{30s}));
}

} // namespace
} // namespace uringfwd::test
