// Many connections at once through the binary: all of them are served intact, the fds
// they used are given back, and idle connections do not cost io_uring worker threads.
#include "tests/support/binary_process.hpp"
#include "tests/support/echo_load.hpp"
#include "tests/support/echo_server.hpp"
#include "tests/support/fd_limit.hpp"
#include "tests/support/proc_stats.hpp"
#include "tests/support/sockets.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

constexpr std::size_t kConnections = 1000;
// Clients + echo server in this process, two sockets per connection in the proxy.
constexpr uint64_t kFdsNeeded = 3 * kConnections + 256;
// Pipes the proxy may keep idle for reuse after the load: max_pipes per shard, two fds
// each. The binary runs with a small --max-pipes so a real leak (two sockets per
// connection) cannot hide inside this allowance.
constexpr std::size_t kMaxPipes = 16;

std::string join_failures(const std::vector<std::string>& failures) {
    std::string out;
    for (const auto& f : failures) {
        out += "\n  " + f;
    }
    return out;
}

TEST(Concurrency, ThousandConnectionsEcho64KiBAndFdsReturnToBaseline) {
    if (raise_fd_limit() < kFdsNeeded) {
        GTEST_SKIP() << "RLIMIT_NOFILE hard limit below " << kFdsNeeded;
    }
    EchoServer echo;
    RunningBinary fwd =
        start_binary("127.0.0.1:0", echo.endpoint(),
                     {"--log-level", "warn", "--max-pipes", std::to_string(kMaxPipes)});
    const pid_t pid = fwd.process->pid();
    const int baseline = count_open_fds(pid);
    ASSERT_GT(baseline, 0);

    const EchoLoadResult load =
        run_echo_load(fwd.endpoint, kConnections, 64 * 1024, 4, Deadline{60s});
    EXPECT_EQ(load.connected, kConnections) << join_failures(load.failures);
    EXPECT_EQ(load.verified, kConnections) << join_failures(load.failures);

    const int shards = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const int allowed = baseline + 2 * static_cast<int>(kMaxPipes) * shards;
    RecordProperty("fds_before", baseline);
    int now = 0;
    EXPECT_TRUE(eventually([&] { return (now = count_open_fds(pid)) <= allowed; }, Deadline{5s}))
        << "fds: " << baseline << " before, " << now << " after (allowed " << allowed
        << " with idle pipes)";
}

TEST(Concurrency, ThousandIdleConnectionsUseFewIoWorkers) {
    if (raise_fd_limit() < kFdsNeeded) {
        GTEST_SKIP() << "RLIMIT_NOFILE hard limit below " << kFdsNeeded;
    }
    EchoServer echo;
    RunningBinary fwd = start_binary("127.0.0.1:0", echo.endpoint(), {"--log-level", "warn"});
    const pid_t pid = fwd.process->pid();

    std::vector<UniqueFd> clients;
    clients.reserve(kConnections);
    for (std::size_t i = 0; i < kConnections; ++i) {
        clients.push_back(connect_to(fwd.endpoint));
    }
    // Every connection has reached the upstream: the proxy now has 2000 sockets with
    // reads pending on them.
    EXPECT_TRUE(eventually([&] { return echo.open_connections() == kConnections; }, Deadline{10s}))
        << echo.open_connections() << " of " << kConnections << " reached the upstream";
    // Give blocking work a moment to spawn workers, if it is going to.
    std::this_thread::sleep_for(500ms);
    const int workers = count_threads_with_prefix(pid, "iou-wrk");
    RecordProperty("iou_wrk_threads", workers);
    EXPECT_LE(workers, 4) << "idle connections should be parked as poll-armed requests, "
                             "not as blocked io-wq workers";
}

} // namespace
} // namespace uringfwd::test
