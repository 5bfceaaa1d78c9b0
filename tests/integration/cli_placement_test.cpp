// Placement flags through the binary, by what the kernel reports of its threads:
// --numa-node picks the shards' CPUs (each shard thread is pinned inside the node, and
// a node that does not exist is refused), --iowq-cpus cpu keeps a shard's io-wq workers
// on its CPU, and --iowq-cpus node logs the CPUs the kernel gave the workers, which are
// the ones they have: on Linux 6.2 and later the shard's CPU only, not its node's
// (engine/shard/shard_setup.cpp report_worker_cpus says why). The cpu case's {0} is also
// what a worker created by the pinned shard thread would have without any mask.
#include "tests/support/binary_process.hpp"
#include "tests/support/echo_server.hpp"
#include "tests/support/eventually.hpp"
#include "tests/support/exchange.hpp"
#include "tests/support/payload.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/transfer_checks.hpp"
#include "uringfwd/cpu_list.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <dirent.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <vector>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

std::string first_line(const std::string& path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
}

// Each thread of `pid` whose comm starts with `prefix` -> its Cpus_allowed_list.
std::map<std::string, std::string> thread_cpus(pid_t pid, const std::string& prefix) {
    std::map<std::string, std::string> out;
    const std::string task = fmt::format("/proc/{}/task", pid);
    DIR* dir = ::opendir(task.c_str());
    if (dir == nullptr)
        return out;
    while (const dirent* e = ::readdir(dir)) {
        if (e->d_name[0] == '.')
            continue;
        const std::string base = task + "/" + e->d_name;
        const std::string comm = first_line(base + "/comm");
        if (comm.rfind(prefix, 0) != 0)
            continue;
        std::ifstream status(base + "/status");
        for (std::string line; std::getline(status, line);) {
            if (line.rfind("Cpus_allowed_list:", 0) == 0) {
                const std::size_t at = line.find_first_not_of(" \t", 18);
                out[comm + "/" + e->d_name] = at == std::string::npos ? "" : line.substr(at);
            }
        }
    }
    ::closedir(dir);
    return out;
}

bool may_use_cpu_0() {
    cpu_set_t set;
    CPU_ZERO(&set);
    return ::sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_ISSET(0, &set);
}

// Node 0's CPUs as the kernel writes them (e.g. "0-1").
std::string node0_cpus() {
    return first_line("/sys/devices/system/node/node0/cpulist");
}

TEST(CliPlacement, NumaNodePinsEveryShardInsideTheNode) {
    const std::string node0 = node0_cpus();
    if (node0.empty())
        GTEST_SKIP() << "no /sys/devices/system/node/node0";
    EchoServer echo;
    RunningBinary fwd = start_binary("127.0.0.1:0", echo.endpoint(), {"--numa-node", "0"});
    const std::vector<int> allowed = parse_cpu_list(node0);
    const std::string err = fwd.process->stderr_text();
    EXPECT_NE(err.find(fmt::format("(node 0: {})", allowed.size())), std::string::npos) << err;
    // The shard threads: one per CPU of the node, each pinned to one of them.
    std::map<std::string, std::string> shards;
    eventually(
        [&] {
            shards = thread_cpus(fwd.process->pid(), "fwd-shard-");
            return shards.size() == allowed.size();
        },
        Deadline{5s});
    ASSERT_EQ(shards.size(), allowed.size()) << err;
    for (const auto& [thread, cpus] : shards) {
        const std::vector<int> pinned = parse_cpu_list(cpus);
        ASSERT_EQ(pinned.size(), 1u) << thread << ": " << cpus;
        EXPECT_NE(std::find(allowed.begin(), allowed.end(), pinned[0]), allowed.end())
            << thread << " on CPU " << pinned[0] << ", node 0 is " << node0;
    }
    UniqueFd client = connect_to(fwd.endpoint);
    EXPECT_TRUE(ReceivedPayload(exchange(client, source_plan(4096, 3), Deadline{5s}), 3, 4096));
}

TEST(CliPlacement, ANumaNodeThatDoesNotExistIsRefused) {
    EchoServer echo;
    BinaryProcess fwd{uring_fwd_binary(),
                      {"--listen", "127.0.0.1:0", "--upstream", echo.endpoint().to_string(),
                       "--numa-node", "63"}};
    const std::optional<ExitStatus> status = fwd.wait_exit(Deadline{10s});
    ASSERT_TRUE(status) << fwd.stderr_text();
    EXPECT_NE(status->code, 0) << status->describe();
    EXPECT_NE(fwd.stderr_text().find("--numa-node"), std::string::npos) << fwd.stderr_text();
}

// A splice through the ring (IORING_OP_SPLICE runs on io-wq workers) in flight, and the
// CPUs those workers may use.
// `log`, when given, receives the binary's stderr.
std::map<std::string, std::string> iowq_worker_cpus(const std::string& placement,
                                                    std::string* log = nullptr) {
    EchoServer echo;
    RunningBinary fwd = start_binary("127.0.0.1:0", echo.endpoint(),
                                     {"--shards", "1", "--cpus", "0", "--data-path", "splice",
                                      "--splice-mechanism", "ring", "--iowq-cpus", placement});
    constexpr uint64_t kBytes = 64ull << 20; // about 0.3 s here: long enough to see a worker
    UniqueFd client = connect_to(fwd.endpoint);
    ExchangeResult result;
    std::thread transfer([&] {
        ExchangePlan plan = source_plan(kBytes, 9);
        plan.order = ExchangePlan::Order::Concurrent;
        result = exchange(client, plan, Deadline{60s});
    });
    std::map<std::string, std::string> workers;
    eventually(
        [&] {
            workers = thread_cpus(fwd.process->pid(), "iou-wrk-");
            return !workers.empty();
        },
        Deadline{20s}, 1ms);
    transfer.join();
    EXPECT_TRUE(ReceivedPayload(result, 9, kBytes)) << result.describe();
    if (log != nullptr)
        *log = fwd.process->stderr_text();
    return workers;
}

TEST(CliPlacement, IowqCpusCpuKeepsTheWorkersOnTheShardsCpu) {
    if (!may_use_cpu_0())
        GTEST_SKIP() << "needs CPU 0";
    const std::map<std::string, std::string> workers = iowq_worker_cpus("cpu");
    ASSERT_FALSE(workers.empty()) << "no io-wq worker seen during a ring splice";
    for (const auto& [thread, cpus] : workers)
        EXPECT_EQ(parse_cpu_list(cpus), std::vector<int>{0}) << thread << ": " << cpus;
}

TEST(CliPlacement, IowqCpusNodeLogsTheCpusTheWorkersWereGiven) {
    const std::vector<int> node0 = parse_cpu_list(node0_cpus());
    if (!may_use_cpu_0() || node0.size() < 2)
        GTEST_SKIP() << "needs CPU 0 in a node of two CPUs or more (node 0: "
                     << format_cpu_list(node0) << ")";
    std::string log;
    const std::map<std::string, std::string> workers = iowq_worker_cpus("node", &log);
    std::smatch said;
    const std::regex line{"io-wq workers: CPUs ([0-9-]+(,[0-9-]+)*)"};
    ASSERT_TRUE(std::regex_search(log, said, line)) << log;
    const std::vector<int> given = parse_cpu_list(said[1].str());
    EXPECT_TRUE(std::includes(node0.begin(), node0.end(), given.begin(), given.end()))
        << "given " << said[1] << ", node 0 is " << format_cpu_list(node0);
    EXPECT_NE(std::find(given.begin(), given.end(), 0), given.end()) << log;
    ASSERT_FALSE(workers.empty()) << "no io-wq worker seen during a ring splice";
    for (const auto& [thread, cpus] : workers)
        EXPECT_EQ(parse_cpu_list(cpus), given) << thread << ": " << cpus << "; the log: " << log;
}

} // namespace
} // namespace uringfwd::test
