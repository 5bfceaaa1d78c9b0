#include "routing/source_limits.hpp"

#include <netinet/in.h>

#include <algorithm>
#include <cstring>

namespace uringfwd::engine {

namespace {

uint64_t mix(uint64_t x) { // splitmix64's finalizer
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

void keep_prefix(std::array<uint8_t, 16>& bytes, unsigned size, unsigned bits) {
    for (unsigned i = 0; i < size; ++i) {
        unsigned from = i * 8;
        if (from >= bits)
            bytes[i] = 0;
        else if (bits - from < 8)
            bytes[i] &= static_cast<uint8_t>(0xff << (8 - (bits - from)));
    }
}

} // namespace

std::optional<SourceKey> source_key(uint64_t route, const sockaddr_storage& peer,
                                    const SourceRule& rule) {
    SourceKey key;
    key.route = route;
    if (peer.ss_family == AF_INET) {
        const auto& v4 = reinterpret_cast<const sockaddr_in&>(peer);
        key.family = AF_INET;
        std::memcpy(key.prefix.data(), &v4.sin_addr, 4);
    } else if (peer.ss_family == AF_INET6) {
        const auto& v6 = reinterpret_cast<const sockaddr_in6&>(peer);
        if (IN6_IS_ADDR_V4MAPPED(&v6.sin6_addr)) {
            key.family = AF_INET;
            std::memcpy(key.prefix.data(), v6.sin6_addr.s6_addr + 12, 4);
        } else {
            key.family = AF_INET6;
            std::memcpy(key.prefix.data(), v6.sin6_addr.s6_addr, 16);
        }
    } else {
        return std::nullopt;
    }
    if (key.family == AF_INET)
        keep_prefix(key.prefix, 4, std::min(rule.prefix_v4, 32u));
    else
        keep_prefix(key.prefix, 16, std::min(rule.prefix_v6, 128u));
    return key;
}

SourceTable::SourceTable(std::size_t capacity, uint64_t seed)
    : buckets_(std::max<std::size_t>(1, (capacity + kWays - 1) / kWays)), seed_(seed),
      table_(std::make_unique<Bucket[]>(buckets_)) {}

// Tokens are counted in nanotokens (kUnit a token), refilled by nanoseconds x rate:
// integer arithmetic, so 10/s gives exactly one token per 100 ms (a double summed over
// steps drifts below it).
int64_t SourceTable::refilled(const Entry& e, Clock::time_point now) {
    int64_t full = int64_t{e.burst} * kUnit;
    if (e.rate == 0)
        return full;
    int64_t elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(now - e.seen).count();
    if (elapsed <= 0)
        return e.tokens;
    int64_t missing = full - e.tokens;
    if (elapsed >= missing / e.rate + 1) // also keeps elapsed x rate from overflowing
        return full;
    return std::min(full, e.tokens + elapsed * int64_t{e.rate});
}

bool SourceTable::expired(const Entry& e, Clock::time_point now) {
    if (!e.used)
        return true;
    if (e.open != 0)
        return false;
    return refilled(e, now) >= int64_t{e.burst} * kUnit;
}

SourceTable::Result SourceTable::admit(const SourceKey& key, const SourceRule& rule,
                                       Clock::time_point now) {
    uint64_t h = seed_ ^ key.route;
    uint64_t words[2];
    std::memcpy(words, key.prefix.data(), sizeof words);
    h = mix(h ^ key.family);
    h = mix(h ^ words[0]);
    h = mix(h ^ words[1]);
    std::size_t b = h % buckets_;
    Bucket& bucket = table_[b];
    std::lock_guard lock(bucket.mu);
    Entry* found = nullptr;
    for (Entry& e : bucket.entries)
        if (e.used && e.key == key)
            found = &e;
    if (found == nullptr) {
        Entry* reuse = nullptr;
        for (Entry& e : bucket.entries)
            if (expired(e, now)) {
                reuse = &e;
                break;
            }
        if (reuse == nullptr) {
            for (Entry& e : bucket.entries)
                if (e.open == 0 && (reuse == nullptr || e.seen < reuse->seen))
                    reuse = &e;
            if (reuse == nullptr) {
                untracked_.fetch_add(1, std::memory_order_relaxed);
                return {Verdict::Untracked, {}};
            }
            evictions_.fetch_add(1, std::memory_order_relaxed);
        }
        uint32_t generation = reuse->generation + 1;
        *reuse = Entry{};
        reuse->key = key;
        reuse->used = true;
        reuse->generation = generation;
        reuse->rate = rule.rate;
        reuse->burst = rule.burst != 0 ? rule.burst : rule.rate;
        reuse->tokens = int64_t{reuse->burst} * kUnit;
        reuse->seen = now;
        found = reuse;
    }
    Entry& e = *found;
    e.rate = rule.rate; // a reload's new values
    e.burst = rule.burst != 0 ? rule.burst : rule.rate;
    e.tokens = refilled(e, now);
    e.seen = now;
    if (rule.max_open != 0 && e.open >= rule.max_open)
        return {Verdict::OverOpen, {}};
    if (e.rate != 0) {
        if (e.tokens < kUnit)
            return {Verdict::OverRate, {}};
        e.tokens -= kUnit;
    }
    if (rule.max_open == 0)
        return {Verdict::Admitted, {}};
    ++e.open;
    auto index =
        static_cast<uint32_t>(b * kWays + static_cast<std::size_t>(&e - bucket.entries.data()));
    return {Verdict::Admitted, {index, e.generation}};
}

void SourceTable::release(Hold& hold) {
    if (!hold.held())
        return;
    Bucket& bucket = table_[hold.index / kWays];
    {
        std::lock_guard lock(bucket.mu);
        Entry& e = bucket.entries[hold.index % kWays];
        if (e.used && e.generation == hold.generation && e.open > 0)
            --e.open;
    }
    hold = Hold{};
}

std::size_t SourceTable::tracked(Clock::time_point now) const {
    std::size_t n = 0;
    for (std::size_t b = 0; b < buckets_; ++b) {
        std::lock_guard lock(table_[b].mu);
        for (const Entry& e : table_[b].entries)
            n += expired(e, now) ? 0 : 1;
    }
    return n;
}

} // namespace uringfwd::engine
