#include "cli/flags/flag_values.hpp"

#include "cli/flags/flags.hpp"
#include "uringfwd/cpu_list.hpp"
#include "uringfwd/numa_topology.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace uringfwd::cli {

std::vector<int> parse_cpus(const std::string& flag, const std::string& text) {
    try {
        return parse_cpu_list(text);
    } catch (const std::invalid_argument& e) {
        fail(fmt::format("{}: {}", flag, e.what()));
    }
}

std::vector<int> cpus_of_nodes(const std::string& nodes_text, const std::vector<int>& cpus) {
    std::vector<int> nodes = parse_cpus("--numa-node", nodes_text);
    std::vector<int> from_nodes;
    try {
        from_nodes = read_numa_topology().cpus_of_nodes(nodes);
    } catch (const std::exception& e) {
        fail(fmt::format("--numa-node: {}", e.what()));
    }
    if (cpus.empty())
        return from_nodes;
    std::vector<int> both;
    for (int cpu : cpus)
        if (std::find(from_nodes.begin(), from_nodes.end(), cpu) != from_nodes.end())
            both.push_back(cpu);
    if (both.empty())
        fail("--cpus and --numa-node have no CPU in common");
    return both;
}

Endpoint parse_endpoint(const std::string& flag, const std::string& text) {
    try {
        return Endpoint::parse(text);
    } catch (const std::invalid_argument& e) {
        fail(fmt::format("{}: {}", flag, e.what()));
    }
}

} // namespace uringfwd::cli
