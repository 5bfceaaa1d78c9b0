// A histogram kept by one shard thread and read by anyone (Engine::shard_stats()).
//
// Why it is race-free and cheap: the shard thread is the only writer, so each bucket is
// updated with a relaxed load and store (as bump(), no locked instruction), and the
// histogram lives in the shard's own ShardCounters, so no other thread writes its cache
// lines. A reader takes a relaxed snapshot: each value is one the shard wrote, but the
// snapshot is not atomic as a whole, so it may miss the observation being recorded at
// that instant (its bucket read before, its sum after, or the other way round). A scrape
// a moment later sees it; nothing is ever counted twice or lost.
#pragma once

#include "uringfwd/histogram.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace uringfwd::engine {

template <std::size_t N> class ShardHistogram {
public:
    explicit constexpr ShardHistogram(const std::array<uint64_t, N>& bounds_us)
        : bounds_us_(bounds_us) {}

    // Shard thread only.
    void observe(std::chrono::microseconds value) {
        const auto us = static_cast<uint64_t>(std::max<int64_t>(value.count(), 0));
        // N is a dozen or so: the branch-predictable linear scan beats a binary search.
        std::size_t bucket = 0;
        while (bucket < N && us > bounds_us_[bucket])
            ++bucket;
        add(counts_[bucket], 1);
        add(sum_us_, us);
    }

    HistogramSnapshot snapshot() const {
        HistogramSnapshot s;
        s.bounds_us = bounds_us_;
        s.counts.reserve(N + 1);
        for (const auto& c : counts_)
            s.counts.push_back(c.load(std::memory_order_relaxed));
        s.sum_us = sum_us_.load(std::memory_order_relaxed);
        return s;
    }

private:
    // As bump() in shard_counters.hpp: one writer, so no read-modify-write is needed.
    static void add(std::atomic<uint64_t>& v, uint64_t n) {
        v.store(v.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    }

    const std::array<uint64_t, N>& bounds_us_;
    std::array<std::atomic<uint64_t>, N + 1> counts_{};
    std::atomic<uint64_t> sum_us_{0};
};

} // namespace uringfwd::engine
