// Which online CPUs belong to which NUMA node, read from sysfs, so shards can be placed on
// the cores of a chosen node.
#pragma once

#include <string>
#include <vector>

namespace uringfwd {

struct NumaTopology {
    // Index = node id. Sorted online CPUs of each node; a node id with no directory (ids
    // can be sparse) or with only offline or no CPUs (memory-only nodes) has an empty list.
    std::vector<std::vector<int>> node_cpus;

    // The node holding `cpu`, or -1 when the CPU is offline or unknown.
    int node_of_cpu(int cpu) const;

    // The sorted, deduplicated union of the CPUs of `nodes`. Throws std::invalid_argument
    // for a node id that is negative or beyond the highest node present.
    std::vector<int> cpus_of_nodes(const std::vector<int>& nodes) const;

    bool operator==(const NumaTopology&) const = default;
};

// Reads `<sysfs_root>/node/node<N>/cpulist` for each node and `<sysfs_root>/cpu/online`,
// leaving offline CPUs out. A kernel without NUMA support has no node directory; that
// machine is reported as node 0 holding all online CPUs. The root is a parameter so tests
// can point it at a fake tree. Throws std::runtime_error when a file cannot be read and
// std::invalid_argument when one does not hold a valid cpulist.
NumaTopology read_numa_topology(const std::string& sysfs_root = "/sys/devices/system");

} // namespace uringfwd
