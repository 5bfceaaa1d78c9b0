#include "tests/hardening/scale_setup.hpp"

#include "tests/hardening/netns_topology.hpp"
#include "tests/support/fd_limit.hpp"
#include "tests/support/proc_stats.hpp"

#include <gtest/gtest.h>

#include <sched.h>

#include <cstdlib>
#include <fmt/core.h>
#include <fstream>
#include <sstream>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

// Descriptors this process needs besides the clients: gtest, the engine's output
// pipes, epoll, /proc reads.
constexpr uint64_t kOwnSpareFds = 1000;

std::string prlimit_tool() {
    return find_tool("prlimit");
}

} // namespace

std::optional<std::string> scale_skip_reason(std::size_t clients, std::size_t sockets_per_process,
                                             int cpus) {
    const char* enabled = std::getenv("URING_FWD_SCALE");
    if (enabled == nullptr || std::string(enabled) != "1")
        return fmt::format("set URING_FWD_SCALE=1 to run ({} client connections)", clients);
    const uint64_t want = sockets_per_process + kOwnSpareFds;
    if (raise_fd_limit_to(want) < want)
        return fmt::format("this process may not raise RLIMIT_NOFILE to {} (needs "
                           "CAP_SYS_RESOURCE, or a hard limit that high)",
                           want);
    std::ifstream range_file("/proc/sys/net/ipv4/ip_local_port_range");
    uint64_t low = 0;
    uint64_t high = 0;
    if (!(range_file >> low >> high) || high < low || high - low + 1 < clients + 1000)
        return fmt::format("net.ipv4.ip_local_port_range {}-{} has too few ports for {} "
                           "clients to one address",
                           low, high, clients);
    if (prlimit_tool().empty())
        return "prlimit (util-linux) is not installed";
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(0, sizeof(set), &set) != 0)
        return "sched_getaffinity failed";
    for (int cpu = 0; cpu < cpus; ++cpu)
        if (!CPU_ISSET(cpu, &set))
            return fmt::format("needs CPUs 0-{} in the affinity mask", cpus - 1);
    return std::nullopt;
}

Listener listen_on_loopback_address(int n) {
    Endpoint ep;
    ep.kind = Endpoint::Kind::Inet;
    ep.host = fmt::format("127.0.0.{}", n);
    return listen_on(ep);
}

LimitedEngine start_limited_engine(const std::vector<Endpoint>& upstreams,
                                   const std::vector<std::string>& extra) {
    std::vector<std::string> args = {fmt::format("--nofile={0}:{0}", kEngineFdLimit), "--",
                                     uring_fwd_binary(), "--listen", "127.0.0.1:0"};
    for (const Endpoint& upstream : upstreams)
        args.insert(args.end(), {"--upstream", upstream.to_string()});
    args.insert(args.end(), extra.begin(), extra.end());
    LimitedEngine engine;
    engine.process = std::make_unique<BinaryProcess>(prlimit_tool(), args);
    const auto endpoint = engine.process->wait_listening(Deadline{15s});
    if (!endpoint) {
        ADD_FAILURE() << "the engine did not start listening; stderr:\n"
                      << engine.process->stderr_text();
        engine.process.reset();
        return engine;
    }
    engine.endpoint = *endpoint;
    return engine;
}

std::pair<uint64_t, uint64_t> nofile_limits(pid_t pid) {
    std::ifstream in(fmt::format("/proc/{}/limits", pid));
    std::string line;
    while (std::getline(in, line)) {
        // "Max open files            20000                20000                files"
        if (line.starts_with("Max open files")) {
            std::istringstream fields(line.substr(sizeof("Max open files") - 1));
            uint64_t soft = 0;
            uint64_t hard = 0;
            if (fields >> soft >> hard)
                return {soft, hard};
        }
    }
    return {0, 0};
}

std::map<std::string, int> iowq_workers(pid_t pid) {
    return threads_by_comm(pid, "iou-wrk-");
}

bool iowq_at_most(pid_t pid, int per_owner, int owners, std::string& seen) {
    const auto workers = iowq_workers(pid);
    seen.clear();
    bool ok = static_cast<int>(workers.size()) <= owners;
    for (const auto& [name, count] : workers) {
        seen += fmt::format("{}{}: {}", seen.empty() ? "" : ", ", name, count);
        ok = ok && count <= per_owner;
    }
    if (seen.empty())
        seen = "none";
    return ok;
}

} // namespace uringfwd::test
