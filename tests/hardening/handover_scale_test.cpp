// An upgrade's connection hand-over at scale: 9000 idle connections on two shards move
// to the successor, and the time it takes is reported. Fd-hungry, so it runs only with
// URING_FWD_SCALE=1 (the scale suite).
#include "tests/hardening/forked_echo_server.hpp"
#include "tests/support/binary_process.hpp"
#include "tests/support/eventually.hpp"
#include "tests/support/fd_limit.hpp"
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

constexpr std::size_t kConnections = 9000;

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

TEST(HandoverScale, NineThousandIdleConnectionsMoveToTheSuccessor) {
    const char* enabled = std::getenv("URING_FWD_SCALE");
    if (enabled == nullptr || std::string(enabled) != "1")
        GTEST_SKIP() << "set URING_FWD_SCALE=1 to run (9000 connections, ~36 000 fds)";
    // The successor holds what it adopts on plain fds, two a connection (docs/handover.md),
    // so under this machine's hard limit of 20 000 it takes about 9 900: 9000 here, as
    // IdleScale holds on one shard.
    if (raise_fd_limit() < 2 * kConnections + 1000)
        GTEST_SKIP() << "RLIMIT_NOFILE hard limit too low for 9000 adopted connections";
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
}

} // namespace
} // namespace uringfwd::test
