// Maglev consistent hashing (Eisenbud et al., "Maglev: A Fast and Reliable Software
// Network Load Balancer", NSDI 2016, §3.4): a lookup table of M entries, M prime, in
// which every member owns a near-equal share (or its weight's share) of the entries; a
// client's hash picks an entry. Each member fills the table in the order of its own
// pseudo-random permutation of the entries, so the table depends only on the members,
// and removing one moves few clients of the others.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace uringfwd::engine {

class MaglevTable {
public:
    struct Member {
        // What identifies the member to every engine (its address as text): the table is
        // a function of the keys and weights, not of the order members are listed in.
        std::string_view key;
        unsigned weight = 1; // below 1 counts as 1
    };

    MaglevTable() = default; // no members: find() finds nothing

    // Builds the table; lookup() and find() return indices into `members`. Two members
    // with the same key and weight are interchangeable (they share a permutation).
    explicit MaglevTable(std::span<const Member> members);

    // M for a pool of `members`: a prime of at least 100 x members, so that each
    // member's share of the entries is within about 1 % of its weight's (the paper's
    // rule), taken from a fixed ladder: the first prime after each power of two from
    // 4096 (4099, 8209, 16411, ...). Why a ladder: M must not change with every member
    // added or removed, since a new M moves nearly every client (hash % M). Why from
    // 4096: the clients a removal moves beyond those of the removed member shrink as M
    // grows (measured, 5 members, one removed: 21.9 % moved at M = 521, 20.4 % at 4099,
    // the ideal being 20 %), and up to 40 members M is then the same for every pool. It
    // costs 16 KiB per table; beyond 40 members, at most twice 100 x members entries.
    static std::size_t table_size(std::size_t members);

    std::size_t size() const { return entries_.size(); }
    std::size_t members() const { return by_key_.size(); }
    bool empty() const { return entries_.empty(); }

    // The member whose entry `key_hash` falls on. Requires !empty().
    std::size_t lookup(uint64_t key_hash) const { return entries_[slot_of(key_hash)]; }

    // The first member for which eligible(member) holds, walking the entries from the
    // one lookup() reads. A client whose member is eligible stays on it; the clients of
    // an ineligible member spread over the others, in proportion to their entries, and
    // come back when it does: nobody else moves, and no table has to be rebuilt for a
    // down or full member. After a full lap (possible only for members whose weight was
    // too small to win any entry) the members are tried in key order. nullopt when no
    // member is eligible; the walk is then M steps, so callers that can check cheaply
    // that some member is eligible should. Allocates nothing.
    template <typename Eligible>
    std::optional<std::size_t> find(uint64_t key_hash, Eligible&& eligible) const {
        if (entries_.empty())
            return std::nullopt;
        std::size_t slot = slot_of(key_hash);
        for (std::size_t step = 0; step < entries_.size(); ++step) {
            if (eligible(std::size_t{entries_[slot]}))
                return entries_[slot];
            if (++slot == entries_.size())
                slot = 0;
        }
        for (uint32_t member : by_key_)
            if (eligible(std::size_t{member}))
                return member;
        return std::nullopt;
    }

    // How many entries `member` owns (its share is that over size()). O(M): for tests
    // and stats.
    std::size_t entries_of(std::size_t member) const;

private:
    std::size_t slot_of(uint64_t key_hash) const { return key_hash % entries_.size(); }

    std::vector<uint32_t> entries_; // M entries, each a caller's member index
    std::vector<uint32_t> by_key_;  // the caller's member indices, in key order
};

} // namespace uringfwd::engine
