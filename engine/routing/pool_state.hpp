// One shard's view of an upstream pool: which member the next connection goes to, and
// what that choice depends on (open connections, limits, health). Shards share
// nothing, so each holds its own PoolState, counts its own connections and enforces its
// own part of every limit (route.hpp). Pure logic: no sockets, time passed in.
#pragma once

#include "routing/maglev.hpp"
#include "routing/passive_health.hpp"
#include "routing/smooth_wrr.hpp"
#include "routing/tried_set.hpp"
#include "uringfwd/route.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace uringfwd::engine {

class PoolState {
public:
    using Clock = std::chrono::steady_clock;

    struct Member {
        unsigned weight = 1; // the configured weight, at least 1
        bool backup = false;
        std::size_t max_active = 0; // this shard's part of max_connections; 0: no limit
        std::size_t active = 0;     // this shard's connections to it, connecting included
        bool checked_up = true;     // the active health checker's last verdict
        PassiveHealthState passive;
    };

    // `keys`: one per member, in the pool's order, naming it to every engine (its
    // address as text, e.g. Endpoint::to_string()); Maglev builds its tables from them,
    // the other policies ignore them and accept an empty span. `shards`: how many shards
    // split the limits (0 counts as 1). Throws std::invalid_argument when Maglev has not
    // one key per member.
    PoolState(const UpstreamPool& pool, std::span<const std::string> keys, std::size_t shards);

    std::size_t size() const { return members_.size(); }
    BalancePolicy policy() const { return policy_; }
    const Member& member(std::size_t m) const { return members_[m]; }

    // The member for a new connection attempt, by the pool's policy, among the
    // candidates: members up at `now`, not full, and not in `tried` (the members this
    // connection already tried). Backup members are candidates only while no primary
    // member is up and untried; while one is, the answer is a primary or nothing, even
    // if every such primary is full (a full primary holds the backups back, as a full
    // server in HAProxy queues rather than spilling over to its backups). `client_hash`
    // (hash_client_address()) matters to Maglev only. nullopt: no candidate. Allocates
    // nothing.
    std::optional<std::size_t> choose(uint64_t client_hash, const TriedSet& tried,
                                      Clock::time_point now);

    // A connection to `m` begins (call when its connect is submitted, so that connects
    // in flight count towards full() and least-active) and ends (its connect failed or
    // it closed).
    void opened(std::size_t m) { ++members_[m].active; }
    void closed(std::size_t m);
    bool full(std::size_t m) const;

    // Passive health (PassiveHealthState): the outcome of a connect to `m`. Each returns
    // true when it changes whether `m` is marked down, the moment to log it: failed, on
    // the `fall`-th failure in a row; succeeded, when a marked member connects again.
    // Failed trials while marked down extend the backoff and return false.
    bool connect_failed(std::size_t m, Clock::time_point now);
    bool connect_succeeded(std::size_t m);

    // The engine-wide active health checker's verdict on `m` (up until it says
    // otherwise). Returns true when it changed.
    bool set_checked_up(std::size_t m, bool up);

    // Whether `m` may be chosen at `now` as far as health goes: the checker has it up
    // and passive health has it neither down nor in its backoff.
    bool up(std::size_t m, Clock::time_point now) const;

private:
    BalancePolicy policy_;
    PassiveHealth passive_config_;
    std::vector<Member> members_;
    // Round-robin's state; least-active's too, which shares out ties by weight.
    SmoothWrr wrr_;
    // Maglev: one table of the primaries and one of the backups, since either set is
    // used alone; each maps table indices back to pool indices.
    MaglevTable primary_table_;
    MaglevTable backup_table_;
    std::vector<uint32_t> primary_ids_;
    std::vector<uint32_t> backup_ids_;
};

} // namespace uringfwd::engine
