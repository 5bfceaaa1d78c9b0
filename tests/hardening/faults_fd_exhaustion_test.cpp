// Fault: the binary runs out of file descriptors. Accepting then fails with EMFILE;
// the binary must neither die nor spin on the failing accept, and must serve again once
// fds are free.
#include "tests/hardening/binary_probe.hpp"
#include "tests/hardening/netns_topology.hpp"
#include "tests/support/echo_server.hpp"
#include "tests/support/fd_limit.hpp"
#include "tests/support/proc_stats.hpp"
#include "tests/support/socket_io.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

// One round trip of a few bytes through `fd`.
bool echo_works(int fd, const Deadline& deadline) {
    const std::string ping = "ping";
    if (send_text(fd, ping, deadline).status != IoStatus::Ok) {
        return false;
    }
    std::vector<std::byte> back(ping.size());
    return recv_all(fd, back, deadline).status == IoStatus::Ok &&
           std::memcmp(back.data(), ping.data(), ping.size()) == 0;
}

bool new_connection_echoes(const Endpoint& proxy) {
    UniqueFd fd;
    return try_connect(proxy, 1000ms, fd) == 0 && echo_works(fd.get(), Deadline{2s});
}

// With plain fds (`direct`: "off") accepting fails with EMFILE; with direct
// descriptors the shard's file table (as many slots as the fd limit) fills instead and
// accepting into it fails with ENFILE (docs/kernel.md §11): the same backoff, with its
// own line, `shortage` (auto where this kernel has direct descriptors).
void backs_off_and_recovers(const char* direct, const std::string& shortage) {
    const std::string prlimit = find_tool("prlimit");
    if (prlimit.empty()) {
        GTEST_SKIP() << "prlimit (util-linux) is not installed";
    }
    raise_fd_limit(); // the clients below, not the binary
    EchoServer upstream;
    // Soft and hard both: the binary raises its soft limit to the hard one at start.
    BinaryProcess proc{prlimit,
                       {"--nofile=64:64", "--", uring_fwd_binary(), "--listen", "127.0.0.1:0",
                        "--upstream", upstream.endpoint().to_string(), "--shards", "1",
                        "--direct-descriptors", direct}};
    const auto endpoint = proc.wait_listening(Deadline{10s});
    ASSERT_TRUE(endpoint.has_value()) << proc.stderr_text();
    const bool direct_in_use = proc.stderr_text().find("direct-descriptors=") != std::string::npos;
    if (std::string(direct) != "off" && !direct_in_use) {
        GTEST_SKIP() << "this kernel lacks a piece of direct descriptors";
    }
    ASSERT_TRUE(new_connection_echoes(*endpoint)) << proc.stderr_text();

    // Fill the binary's fds with working connections (two fds each), one at a time so
    // each is known to forward end to end, until one does not.
    std::vector<UniqueFd> working;
    for (int i = 0; i < 40; ++i) {
        UniqueFd fd;
        if (try_connect(*endpoint, 500ms, fd) != 0 || !echo_works(fd.get(), Deadline{1s})) {
            break;
        }
        working.push_back(std::move(fd));
    }
    ASSERT_GE(working.size(), 10u) << proc.stderr_text();
    // Then far more clients than fit: connects complete from the listen backlog, and
    // the binary's accepts fail with EMFILE.
    std::vector<UniqueFd> waiting;
    for (int i = 0; i < 80; ++i) {
        UniqueFd fd;
        if (try_connect(*endpoint, 500ms, fd) == 0) {
            waiting.push_back(std::move(fd));
        }
    }
    ASSERT_TRUE(eventually([&] { return proc.stderr_text().find(shortage) != std::string::npos; },
                           Deadline{5s}))
        << "no \"" << shortage << "\" reported; stderr:\n"
        << proc.stderr_text();

    // Out of fds with clients still waiting: accepts keep failing. The binary must wait
    // (back off), not retry in a loop.
    const double cpu_before = cpu_seconds(proc.pid());
    std::this_thread::sleep_for(2s);
    const double cpu_used = cpu_seconds(proc.pid()) - cpu_before;
    std::printf("%zu working connections, %zu more clients; cpu while out of fds: %.3f s over "
                "2 s\n",
                working.size(), waiting.size(), cpu_used);
    EXPECT_LT(cpu_used, 0.5) << "spinning on a failing accept";
    ASSERT_TRUE(process_alive(proc.pid())) << proc.stderr_text();
    const auto totals = request_totals(proc, Deadline{5s});
    ASSERT_TRUE(totals.has_value()) << proc.stderr_text();
    EXPECT_GT(totals->at("accept_backoffs"), 0u);
    std::printf("accepted=%llu upstream_failures=%llu accept_backoffs=%llu\n",
                static_cast<unsigned long long>(totals->at("accepted")),
                static_cast<unsigned long long>(totals->at("upstream_failures")),
                static_cast<unsigned long long>(totals->at("accept_backoffs")));

    // The connections made before the shortage are unaffected by it.
    for (const UniqueFd& fd : working) {
        ASSERT_TRUE(echo_works(fd.get(), Deadline{2s})) << proc.stderr_text();
    }

    waiting.clear();
    working.clear();
    EXPECT_TRUE(eventually([&] { return new_connection_echoes(*endpoint); }, Deadline{15s}))
        << "no recovery after the clients closed; stderr:\n"
        << proc.stderr_text();
    EXPECT_TRUE(process_alive(proc.pid()));
    // Warned once per pause, not once per failed accept.
    EXPECT_LT(count_occurrences(proc.stderr_text(), "Too many open files"), 20u)
        << proc.stderr_text();
}

TEST(FaultFdExhaustion, AcceptsBackOffWithoutSpinningAndRecover) {
    backs_off_and_recovers("off", "accept: Too many open files");
}

TEST(FaultFdExhaustion, AFullFileTableBacksOffTheSameWay) {
    backs_off_and_recovers("auto", "accept: the shard's registered file table is full (64 slots");
}

} // namespace
} // namespace uringfwd::test
