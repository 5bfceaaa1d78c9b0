// Which CPUs get a shard, and whether connections can be steered to them. Pure logic.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

namespace uringfwd::engine {

// allowed: the CPUs this process may run on (its affinity mask, online CPUs only).
// requested: CPUs the operator asked for (empty = all allowed ones).
// shards: how many shards (0 = one per chosen CPU).
// Returns the CPUs to pin shards to, in order. Throws std::invalid_argument naming the
// problem: a requested CPU outside the affinity mask, more shards than CPUs, no CPU.
std::vector<int> choose_shard_cpus(const std::vector<int>& allowed,
                                   const std::vector<int>& requested, std::size_t shards);

// The reuseport BPF program picks listener number (receiving CPU - base); that maps
// CPUs to shards only when the shards' CPUs are consecutive and in order. Returns the
// base then, nullopt otherwise.
std::optional<int> consecutive_base(const std::vector<int>& cpus);

} // namespace uringfwd::engine
