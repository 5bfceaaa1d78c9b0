// Fault: the kernel refuses the pipe size the binary asks for. Root is exempt from the
// pipe limits, so the binary runs as nobody (setpriv), where asking above
// fs.pipe-max-size, or holding more than fs.pipe-user-pages-soft (64 MiB by default) in
// pipes, gets EPERM. The pool must ask for less, say so once, and keep every
// connection intact. No system setting is changed.
#include "tests/hardening/binary_probe.hpp"
#include "tests/hardening/netns_topology.hpp"
#include "tests/support/payload.hpp"
#include "tests/support/scripted_peer.hpp"
#include "tests/support/transfer_checks.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>
#include <vector>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

constexpr const char* kRefusal = "kernel refused";

uint64_t read_proc_number(const char* path) {
    std::ifstream in(path);
    uint64_t v = 0;
    in >> v;
    return v;
}

class FaultPipeBudget : public ::testing::Test {
protected:
    void SetUp() override {
        if (::geteuid() != 0) {
            GTEST_SKIP() << "needs root to start the binary as another user";
        }
        setpriv_ = find_tool("setpriv");
        if (setpriv_.empty()) {
            GTEST_SKIP() << "setpriv (util-linux) is not installed";
        }
        // The binary must be reachable by nobody.
        if (::access(uring_fwd_binary().c_str(), R_OK | X_OK) != 0) {
            GTEST_SKIP() << "binary not accessible";
        }
    }

    // The binary as uid/gid 65534 with no supplementary groups (and so no capabilities).
    std::unique_ptr<BinaryProcess> start_as_nobody(const Endpoint& upstream,
                                                   std::vector<std::string> extra) {
        std::vector<std::string> args = {"--reuid=65534", "--regid=65534", "--clear-groups", "--",
                                         uring_fwd_binary(), "--listen", "127.0.0.1:0",
                                         "--upstream", upstream.to_string(), "--shards", "1",
                                         // What is tested here is the pipe budget.
                                         "--data-path", "splice"};
        args.insert(args.end(), extra.begin(), extra.end());
        return std::make_unique<BinaryProcess>(setpriv_, std::move(args));
    }

    // `count` clients at once, each sending `size` bytes to the sink, all checked.
    static void send_concurrently(const Endpoint& proxy, ScriptedPeer& sink, int count,
                                  uint64_t size) {
        std::vector<ExchangeResult> results(static_cast<std::size_t>(count));
        {
            std::vector<std::jthread> clients;
            for (int i = 0; i < count; ++i) {
                clients.emplace_back([&, i] {
                    UniqueFd fd = connect_to(proxy);
                    results[static_cast<std::size_t>(i)] = exchange(
                        fd, source_plan(size, 500 + static_cast<uint64_t>(i)), Deadline{60s});
                });
            }
        }
        for (const auto& r : results) {
            EXPECT_TRUE(SentAll(r, size));
        }
        const auto received = sink.wait_results(static_cast<std::size_t>(count), Deadline{30s});
        ASSERT_EQ(received.size(), static_cast<std::size_t>(count));
        // Which seed a sink connection carried is only known from its hash.
        std::size_t intact = 0;
        for (const auto& r : received) {
            for (int i = 0; i < count; ++i) {
                if (r.received == size &&
                    r.received_sha256 == payload_sha256(500 + static_cast<uint64_t>(i), size)) {
                    ++intact;
                    break;
                }
            }
        }
        EXPECT_EQ(intact, static_cast<std::size_t>(count));
    }

    std::string setpriv_;
};

// --pipe-size above pipe-max-size: every F_SETPIPE_SZ for that size is refused.
TEST_F(FaultPipeBudget, SizeAboveMaxIsHalvedOnceAndTransfersStayIntact) {
    const uint64_t max = read_proc_number("/proc/sys/fs/pipe-max-size");
    ASSERT_GT(max, 0u);
    ScriptedPeer sink{sink_plan()};
    auto proc = start_as_nobody(sink.endpoint(), {"--pipe-size", std::to_string(max * 4)});
    const auto endpoint = proc->wait_listening(Deadline{10s});
    ASSERT_TRUE(endpoint.has_value()) << proc->stderr_text();

    send_concurrently(*endpoint, sink, 8, 4 * 1024 * 1024);

    const auto totals = request_totals(*proc, Deadline{5s});
    ASSERT_TRUE(totals.has_value()) << proc->stderr_text();
    EXPECT_GE(totals->at("pipe_size_reductions"), 1u) << proc->stderr_text();
    EXPECT_EQ(count_occurrences(proc->stderr_text(), kRefusal), 1u) << proc->stderr_text();
    std::printf("pipe_size_reductions=%llu pipes_created=%llu\n",
                static_cast<unsigned long long>(totals->at("pipe_size_reductions")),
                static_cast<unsigned long long>(totals->at("pipes_created")));
}

// Default 1 MiB pipes, 96 connections each holding one (their upstream reads only after
// a pause): past ~64 pipes the per-user budget is spent and the kernel refuses.
TEST_F(FaultPipeBudget, PerUserBudgetSpentByManyPipes) {
    const uint64_t max = read_proc_number("/proc/sys/fs/pipe-max-size");
    const uint64_t soft_pages = read_proc_number("/proc/sys/fs/pipe-user-pages-soft");
    constexpr int kConnections = 96;
    if (soft_pages == 0 || max * kConnections <= soft_pages * 4096) {
        GTEST_SKIP() << "the per-user pipe budget is off or too large to spend here";
    }
    ExchangePlan slow = sink_plan();
    // Every direction fills its socket buffers (megabytes on loopback), then its pipe,
    // and holds that pipe until the pause is over.
    slow.read_delay = 3s;
    ScriptedPeer sink{slow};
    auto proc = start_as_nobody(sink.endpoint(), {"--max-pipes", "256"});
    const auto endpoint = proc->wait_listening(Deadline{10s});
    ASSERT_TRUE(endpoint.has_value()) << proc->stderr_text();

    send_concurrently(*endpoint, sink, kConnections, 8 * 1024 * 1024);

    const auto totals = request_totals(*proc, Deadline{5s});
    ASSERT_TRUE(totals.has_value()) << proc->stderr_text();
    std::printf("pipe_size_reductions=%llu pipes_created=%llu pipe_waits=%llu\n",
                static_cast<unsigned long long>(totals->at("pipe_size_reductions")),
                static_cast<unsigned long long>(totals->at("pipes_created")),
                static_cast<unsigned long long>(totals->at("pipe_waits")));
    EXPECT_GE(totals->at("pipe_size_reductions"), 1u) << proc->stderr_text();
    EXPECT_EQ(count_occurrences(proc->stderr_text(), kRefusal), 1u) << proc->stderr_text();
}

} // namespace
} // namespace uringfwd::test
