// NUMA topology from sysfs; see numa_topology.hpp.
#include "uringfwd/numa_topology.hpp"

#include "uringfwd/cpu_list.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string_view>

namespace uringfwd {
namespace {

namespace fs = std::filesystem;

// Node ids share the kernel's bound on CPU numbers (MAX_NUMNODES is far smaller), which
// keeps a stray "node99999999" entry from sizing a huge vector.
constexpr int kMaxNode = kMaxCpu;

std::vector<int> read_cpu_list_file(const fs::path& path) {
    std::ifstream in(path);
    if (!in) {
        throw std::runtime_error(
            fmt::format("cannot read {}: {}", path.string(), std::strerror(errno)));
    }
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    if (in.bad()) {
        throw std::runtime_error(fmt::format("cannot read {}", path.string()));
    }
    try {
        return parse_cpu_list(text);
    } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(fmt::format("{}: {}", path.string(), e.what()));
    }
}

// "node12" -> 12. Other entries in node/ ("possible", "online", "has_cpu", "power", ...)
// are not nodes and yield nullopt.
std::optional<int> node_id_of(std::string_view name) {
    constexpr std::string_view prefix = "node";
    if (!name.starts_with(prefix) || name.size() == prefix.size()) {
        return std::nullopt;
    }
    int id = 0;
    for (const char c : name.substr(prefix.size())) {
        if (c < '0' || c > '9') {
            return std::nullopt;
        }
        id = id * 10 + (c - '0');
        if (id > kMaxNode) {
            return std::nullopt;
        }
    }
    return id;
}

std::vector<int> intersect(const std::vector<int>& a, const std::vector<int>& b) {
    std::vector<int> out;
    std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
    return out;
}

} // namespace

int NumaTopology::node_of_cpu(int cpu) const {
    for (std::size_t node = 0; node < node_cpus.size(); ++node) {
        if (std::binary_search(node_cpus[node].begin(), node_cpus[node].end(), cpu)) {
            return static_cast<int>(node);
        }
    }
    return -1;
}

std::vector<int> NumaTopology::cpus_of_nodes(const std::vector<int>& nodes) const {
    std::vector<int> out;
    for (const int node : nodes) {
        if (node < 0 || static_cast<std::size_t>(node) >= node_cpus.size()) {
            throw std::invalid_argument(
                fmt::format("NUMA node {} does not exist (this machine has nodes 0-{})", node,
                            static_cast<int>(node_cpus.size()) - 1));
        }
        const auto& cpus = node_cpus[static_cast<std::size_t>(node)];
        out.insert(out.end(), cpus.begin(), cpus.end());
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

NumaTopology read_numa_topology(const std::string& sysfs_root) {
    const fs::path root(sysfs_root);
    const std::vector<int> online = read_cpu_list_file(root / "cpu" / "online");

    NumaTopology topology;
    std::error_code ec;
    const fs::path node_dir = root / "node";
    if (fs::is_directory(node_dir, ec)) {
        for (const fs::directory_entry& entry : fs::directory_iterator(node_dir)) {
            const std::optional<int> id = node_id_of(entry.path().filename().string());
            if (!id || !entry.is_directory()) {
                continue;
            }
            const auto index = static_cast<std::size_t>(*id);
            if (topology.node_cpus.size() <= index) {
                topology.node_cpus.resize(index + 1);
            }
            // A CPU that is offline cannot run a shard, so it is dropped here once rather
            // than checked by every caller.
            topology.node_cpus[index] =
                intersect(read_cpu_list_file(entry.path() / "cpulist"), online);
        }
    }
    if (topology.node_cpus.empty()) {
        topology.node_cpus.push_back(online);
    }
    return topology;
}

} // namespace uringfwd
