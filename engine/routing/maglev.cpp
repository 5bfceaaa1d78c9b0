#include "routing/maglev.hpp"

#include "routing/hash.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <queue>
#include <stdexcept>

namespace uringfwd::engine {

namespace {

// Two seeds, so that a member's offset and skip come from independent hashes of its key
// (the paper's h1 and h2).
constexpr uint64_t kOffsetSeed = 1;
constexpr uint64_t kSkipSeed = 2;

bool is_prime(std::size_t n) {
    if (n < 2)
        return false;
    for (std::size_t d = 2; d * d <= n; ++d)
        if (n % d == 0)
            return false;
    return true;
}

std::size_t next_prime(std::size_t n) {
    while (!is_prime(n))
        ++n;
    return n;
}

// A member's turn to claim an entry. Its k-th turn (k = 0, 1, ...) falls due at time
// (2k + 1) / (2 x weight): a member of weight w takes w times as many turns as one of
// weight 1, evenly spread, so that after any number of turns every member has claimed
// its weight's share of them, give or take one. The paper gives every member one turn
// per round (Pseudocode 1); with equal weights this is the same. A plain "w turns per
// round" would not do: with large weights the table could fill within one round, before
// members late in the round had any turn.
struct Turn {
    uint64_t due;    // 2k + 1, the numerator of the due time
    uint64_t weight; // its denominator is 2 x weight
    uint32_t rank;   // the member's place in key order: breaks ties the same everywhere
};

// priority_queue keeps its greatest element on top: "less" means "due later".
struct DueLater {
    bool operator()(const Turn& a, const Turn& b) const {
        const uint64_t a_time = a.due * b.weight; // a.due / a.weight vs b.due / b.weight
        const uint64_t b_time = b.due * a.weight;
        if (a_time != b_time)
            return a_time > b_time;
        return a.rank > b.rank;
    }
};

} // namespace

std::size_t MaglevTable::table_size(std::size_t members) {
    if (members == 0)
        return 0;
    // Entries are 32-bit member indices; pools are far smaller than this.
    if (members > (std::size_t{1} << 24))
        throw std::invalid_argument("maglev: too many members");
    const std::size_t wanted = 100 * members;
    for (std::size_t base = 4096;; base *= 2) {
        const std::size_t m = next_prime(base);
        if (m >= wanted)
            return m;
    }
}

MaglevTable::MaglevTable(std::span<const Member> members) {
    const std::size_t n = members.size();
    const std::size_t m = table_size(n);
    if (n == 0)
        return;

    // Key order, not the caller's: engines listing the same members differently must
    // build the same table.
    by_key_.resize(n);
    std::iota(by_key_.begin(), by_key_.end(), 0u);
    std::stable_sort(by_key_.begin(), by_key_.end(), [&](uint32_t a, uint32_t b) {
        if (members[a].key != members[b].key)
            return members[a].key < members[b].key;
        return members[a].weight < members[b].weight;
    });

    // Each member's permutation of the entries: offset, offset + skip, offset + 2 skip,
    // ... (mod M). M is prime and 1 <= skip < M, so it visits every entry once.
    struct Walk {
        std::size_t position; // the next entry this member would claim, if still free
        std::size_t skip;
    };
    std::vector<Walk> walks(n);
    for (std::size_t rank = 0; rank < n; ++rank) {
        const std::string_view key = members[by_key_[rank]].key;
        walks[rank] = {stable_hash(key, kOffsetSeed) % m,
                       stable_hash(key, kSkipSeed) % (m - 1) + 1};
    }

    constexpr uint32_t kFree = std::numeric_limits<uint32_t>::max();
    entries_.assign(m, kFree);
    std::priority_queue<Turn, std::vector<Turn>, DueLater> turns;
    for (std::size_t rank = 0; rank < n; ++rank)
        turns.push({1, std::max(1u, members[by_key_[rank]].weight), static_cast<uint32_t>(rank)});
    // Each turn claims the member's next free entry in its permutation; every turn
    // claims one, so M turns fill the table.
    for (std::size_t filled = 0; filled < m; ++filled) {
        Turn turn = turns.top();
        turns.pop();
        Walk& walk = walks[turn.rank];
        while (entries_[walk.position] != kFree)
            walk.position = (walk.position + walk.skip) % m;
        entries_[walk.position] = turn.rank;
        turn.due += 2;
        turns.push(turn);
    }
    for (uint32_t& entry : entries_)
        entry = by_key_[entry];
}

std::size_t MaglevTable::entries_of(std::size_t member) const {
    return static_cast<std::size_t>(std::count(entries_.begin(), entries_.end(), member));
}

} // namespace uringfwd::engine
