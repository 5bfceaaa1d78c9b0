// A shard's counters: one atomic per entry of the counter list (uringfwd/
// counter_list.hpp), written by the shard thread alone and read by anyone. The
// helpers below update them with a plain load and store: with a single writer that is
// exact, and it keeps locked instructions off the data path.
#pragma once

#include "shard/loop/shard_histogram.hpp"
#include "uringfwd/stats.hpp"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>

namespace uringfwd::engine {

struct ShardCounters {
#define URINGFWD_SHARD_COUNTER(name, kind, help) std::atomic<uint64_t> name{0};
    URINGFWD_COUNTERS(URINGFWD_SHARD_COUNTER)
#undef URINGFWD_SHARD_COUNTER
    // The shard thread's tid: its io-wq workers are named "iou-wrk-<tid>".
    std::atomic<int> thread_id{0};
    // Counted in Connections::finalize(), once per connection (ShardStats).
    ShardHistogram<kConnectTimeBoundsUs.size()> connect_time{kConnectTimeBoundsUs};
    ShardHistogram<kDurationBoundsUs.size()> duration{kDurationBoundsUs};

    std::atomic<uint64_t>& closed(CloseReason reason) {
        switch (reason) {
#define URINGFWD_SHARD_CLOSED(arg, enumerator, name, help)                                         \
    case CloseReason::enumerator:                                                                  \
        return closed_##name;
            URINGFWD_CLOSE_REASONS(URINGFWD_SHARD_CLOSED, )
#undef URINGFWD_SHARD_CLOSED
        }
        return closed_local_error;
    }

    // Adds a relaxed snapshot of every counter to `total`.
    void add_to(EngineStats& total) const {
#define URINGFWD_SHARD_ADD(name, kind, help) total.name += name.load(std::memory_order_relaxed);
        URINGFWD_COUNTERS(URINGFWD_SHARD_ADD)
#undef URINGFWD_SHARD_ADD
    }
};

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
