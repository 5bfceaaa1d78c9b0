// Per-source limits of a route (issue 23): open connections (max_connections_per_source)
// and new connections per second (connection_rate_per_source, a token bucket with a
// burst), a source grouped by prefix (source_prefix_v4/v6). One table for the whole
// engine, keyed by (route, prefix): CPU steering spreads one source over every shard, so
// a per-shard split would be wrong by up to N x shards. Touched on the accept path only.
//
// Bounded memory: `capacity` entries, allocated once, in buckets of kWays behind one
// mutex each (the accept path of two shards rarely meets on one bucket). A new source
// takes a free entry of its bucket, else an expired one (no connection open, its bucket
// full again: forgetting it changes nothing), else the least recently seen one with no
// connection open (counted as an eviction: that source starts again with a full
// bucket). Entries with connections open are never evicted, so every open count stays
// exact; a source whose bucket holds only such entries is let in untracked (counted), as
// HAProxy's stick table does when it cannot make room. The bucket is chosen by a keyed
// hash (a random seed per table), so a client cannot aim a flood at one bucket.
#pragma once

#include <sys/socket.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

namespace uringfwd::engine {

struct SourceRule {
    uint32_t max_open = 0; // 0: no limit
    uint32_t rate = 0;     // new connections per second; 0: no limit
    uint32_t burst = 0;    // the bucket's size (rate when 0)
    unsigned prefix_v4 = 32;
    unsigned prefix_v6 = 64;
    bool active() const { return max_open != 0 || rate != 0; }
};

struct SourceKey {
    uint64_t route = 0; // the route's name, hashed (kept across reloads)
    uint8_t family = 0;
    std::array<uint8_t, 16> prefix{}; // the address with the bits past the prefix cleared
    bool operator==(const SourceKey&) const = default;
};

// The key of `peer`'s prefix on `route`; nullopt for no IP address (a Unix peer). An
// IPv4-mapped IPv6 address counts as its IPv4 address.
std::optional<SourceKey> source_key(uint64_t route, const sockaddr_storage& peer,
                                    const SourceRule& rule);

class SourceTable {
public:
    using Clock = std::chrono::steady_clock;
    static constexpr std::size_t kWays = 8;

    // `capacity` rounded up to whole buckets (at least one).
    explicit SourceTable(std::size_t capacity, uint64_t seed);

    // What one connection holds of an entry; give it back with release().
    struct Hold {
        uint32_t index = UINT32_MAX;
        uint32_t generation = 0;
        bool held() const { return index != UINT32_MAX; }
    };
    enum class Verdict : uint8_t { Admitted, OverOpen, OverRate, Untracked };
    struct Result {
        Verdict verdict = Verdict::Admitted;
        Hold hold{};
    };
    Result admit(const SourceKey& key, const SourceRule& rule, Clock::time_point now);
    // Exactly once per held Hold; the hold is cleared.
    void release(Hold& hold);

    std::size_t capacity() const { return buckets_ * kWays; }
    std::size_t tracked(Clock::time_point now) const; // entries not expired
    uint64_t evictions() const { return evictions_.load(std::memory_order_relaxed); }
    uint64_t untracked() const { return untracked_.load(std::memory_order_relaxed); }

private:
    struct Entry {
        SourceKey key;
        bool used = false;
        uint32_t generation = 0;
        uint32_t open = 0;
        int64_t tokens = 0; // nanotokens
        uint32_t rate = 0;
        uint32_t burst = 0;
        Clock::time_point seen{};
    };
    struct Bucket {
        mutable std::mutex mu;
        std::array<Entry, kWays> entries;
    };
    static constexpr int64_t kUnit = 1'000'000'000;
    static int64_t refilled(const Entry& e, Clock::time_point now);
    static bool expired(const Entry& e, Clock::time_point now);

    std::size_t buckets_;
    uint64_t seed_;
    std::unique_ptr<Bucket[]> table_;
    std::atomic<uint64_t> evictions_{0};
    std::atomic<uint64_t> untracked_{0};
};

} // namespace uringfwd::engine
