// An upgrade's connection hand-over at scale: 10 000 idle connections on two shards move
// to the successor under RLIMIT_NOFILE 20 000, and the time it takes is reported.
// Fd-hungry, so it runs only with URING_FWD_SCALE=1 (the scale suite).
#include "tests/hardening/forked_echo_server.hpp"
#include "tests/support/binary_process.hpp"
#include "tests/support/eventually.hpp"
#include "tests/support/fd_limit.hpp"
#include "tests/support/proc_stats.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/temp_dir.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

constexpr std::size_t kConnections = 10000;

// Each connection echoes an 8-byte tag of its own; how many came back intact.
std::size_t echo_each(const std::vector<UniqueFd>& fds, const Deadline& deadline) {
    constexpr std::size_t kBatch = 500;
    std::size_t good = 0;
    for (std::size_t begin = 0; begin < fds.size() && !deadline.expired(); begin += kBatch) {
        const std::size_t end = std::min(fds.size(), begin + kBatch);
        for (std::size_t i = begin; i < end; ++i) {
            const uint64_t tag = i;
            (void)::send(fds[i].get(), &tag, sizeof(tag), MSG_NOSIGNAL);
        }
        for (std::size_t i = begin; i < end; ++i) {
            uint64_t got = 0;
            pollfd p{fds[i].get(), POLLIN, 0};
            if (::poll(&p, 1, 5000) == 1 && ::recv(fds[i].get(), &got, sizeof(got), MSG_WAITALL) ==
                                                static_cast<ssize_t>(sizeof(got)))
                good += got == i ? 1 : 0;
        }
    }
    return good;
}

TEST(HandoverScale, TenThousandIdleConnectionsMoveToTheSuccessor) {
    const char* enabled = std::getenv("URING_FWD_SCALE");
    if (enabled == nullptr || std::string(enabled) != "1")
        GTEST_SKIP() << "set URING_FWD_SCALE=1 to run (10 000 connections, ~40 000 fds)";
    // Both processes hold the connections in slots of their rings' file tables (direct
    // descriptors, on by default), which RLIMIT_NOFILE does not count: the 20 000 here
    // bound the test's own 10 000 clients, and each process's fds on their way in or
    // out. The successor's plain fds are counted below.
    if (raise_fd_limit() < kConnections + 1000)
        GTEST_SKIP() << "RLIMIT_NOFILE hard limit too low for 10 000 clients";
    ForkedEchoServer upstream{listen_loopback(Family::Inet4)};
    TempDir dir;
    const std::vector<std::string> extra{"--shards", "2", "--upgrade-socket",
                                         dir.path() + "/upgrade.sock"};
    RunningBinary old_process = start_binary("127.0.0.1:0", upstream.endpoint(), extra);
    std::vector<UniqueFd> clients;
    clients.reserve(kConnections);
    for (std::size_t i = 0; i < kConnections; ++i)
        clients.push_back(connect_to(old_process.endpoint, 10s));
    ASSERT_TRUE(
        eventually([&] { return upstream.open_connections() == kConnections; }, Deadline{60s}))
        << upstream.open_connections();
    ASSERT_EQ(echo_each(clients, Deadline{60s}), kConnections);

    std::vector<std::string> args{"--listen", old_process.endpoint.to_string(), "--upstream",
                                  upstream.endpoint().to_string()};
    args.insert(args.end(), extra.begin(), extra.end());
    BinaryProcess successor{uring_fwd_binary(), args};
    const auto start = std::chrono::steady_clock::now();
    const std::optional<ExitStatus> status = old_process.process->wait_exit(Deadline{30s});
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ASSERT_TRUE(status) << old_process.process->stderr_text();
    const std::string err = old_process.process->stderr_text();
    const std::size_t line = err.find("upgrade: handed ");
    ASSERT_NE(line, std::string::npos) << err;
    std::printf("[ handover ] %zu idle connections: the old process exited %.2f s after the "
                "successor started; it says: %s\n",
                kConnections, seconds, err.substr(line, err.find('\n', line) - line).c_str());
    EXPECT_NE(err.find(fmt::format("handed {} connections over", kConnections)), std::string::npos)
        << err.substr(line);
    EXPECT_LT(seconds, 10.0);
    EXPECT_EQ(echo_each(clients, Deadline{60s}), kConnections) << "after the hand-over";
    // Adopted into slots: a few hundred fds of its own (listeners, rings, pipes), not
    // two a connection.
    const int successor_fds = count_open_fds(successor.pid());
    std::printf("[ handover ] the successor holds them with %d open fds\n", successor_fds);
    EXPECT_LT(successor_fds, 2000);
}

} // namespace
} // namespace uringfwd::test
