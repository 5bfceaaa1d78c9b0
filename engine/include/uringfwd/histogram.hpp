// Distributions the engine keeps per shard: how long upstream connects take and how
// long connections last. Fixed buckets, so shards can be summed and a scrape can turn
// them into Prometheus histograms as they are.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace uringfwd {

// Upper bounds of the buckets, in microseconds, ascending; one more bucket above the
// last holds everything longer (+Inf). Connect time: 50 us (loopback) to 10 s (past any
// sensible connect_timeout).
inline constexpr std::array<uint64_t, 14> kConnectTimeBoundsUs = {
    50,     100,    250,     500,     1'000,     2'500,     5'000,
    10'000, 25'000, 100'000, 250'000, 1'000'000, 2'500'000, 10'000'000};
// Connection duration: 1 ms (a health probe, a refused client) to 1 h.
inline constexpr std::array<uint64_t, 12> kDurationBoundsUs = {
    1'000,      10'000,     100'000,    500'000,     1'000'000,     5'000'000,
    10'000'000, 30'000'000, 60'000'000, 300'000'000, 1'800'000'000, 3'600'000'000};

struct HistogramSnapshot {
    std::span<const uint64_t> bounds_us; // upper bounds, as above
    std::vector<uint64_t> counts;        // per bucket (not cumulative): bounds_us.size() + 1
    uint64_t sum_us = 0;                 // of every observation

    uint64_t count() const {
        uint64_t n = 0;
        for (uint64_t c : counts)
            n += c;
        return n;
    }
    // Adds another snapshot of the same buckets (another shard's).
    HistogramSnapshot& operator+=(const HistogramSnapshot& other) {
        if (counts.size() < other.counts.size())
            counts.resize(other.counts.size());
        for (std::size_t i = 0; i < other.counts.size(); ++i)
            counts[i] += other.counts[i];
        sum_us += other.sum_us;
        if (bounds_us.empty())
            bounds_us = other.bounds_us;
        return *this;
    }
};

} // namespace uringfwd
