// Updating a shard's counters (ShardCounters) and naming errors, for the shard's
// source files.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>

namespace uringfwd::engine {

// Single writer: a relaxed load and store is enough and avoids a locked instruction.
inline void bump(std::atomic<uint64_t>& counter, uint64_t n = 1) {
    counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}
inline void drop(std::atomic<uint64_t>& counter) {
    counter.store(counter.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
}
inline void set(std::atomic<uint64_t>& counter, uint64_t value) {
    counter.store(value, std::memory_order_relaxed);
}

// The text of a completion's negated errno.
inline std::string errno_text(int negative_result) {
    return std::strerror(-negative_result);
}

} // namespace uringfwd::engine
