// One shard's view of an upstream pool: which member the next connection goes to, and
// what that choice depends on (open connections, limits, health). Each shard holds its
// own PoolState and counts its own connections (least-active balances by them); a
// member's max_connections is the engine's, counted by every shard in one SharedLimit
// on the admission path. Pure logic: no sockets, time passed in.
#pragma once

#include "routing/maglev.hpp"
#include "routing/passive_health.hpp"
#include "routing/shared_limit.hpp"
#include "routing/smooth_wrr.hpp"
#include "routing/tried_set.hpp"
#include "uringfwd/route.hpp"
#include "uringfwd/runtime.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace uringfwd::engine {

class PoolState {
public:
    using Clock = std::chrono::steady_clock;

    struct Member {
        unsigned weight = 1; // the configured weight (or one set at runtime), at least 1
        bool backup = false;
        SharedLimit* limit = nullptr; // its max_connections, counted by every shard
        std::size_t active = 0;       // this shard's connections to it, connecting included
        bool checked_up = true;       // the active health checker's last verdict
        PassiveHealthState passive;
        MemberState state = MemberState::Ready; // the operator's (runtime.hpp)
        // Slow start: from `ramp_from` on, the member's share climbs from nothing to
        // its weight over `slow_start` (0: no ramp).
        std::chrono::milliseconds slow_start{0};
        Clock::time_point ramp_from{};
    };

    // `keys`: one per member, in the pool's order, naming it to every engine (its
    // address as text, e.g. Endpoint::to_string()); Maglev builds its tables from them,
    // the other policies ignore them and accept an empty span. `limits`: each member's
    // engine-wide counter (MemberRoute::limit), in the pool's order; empty: counters of
    // its own, for this PoolState alone. Throws std::invalid_argument when Maglev has not
    // one key per member, or `limits` is neither empty nor one per member.
    PoolState(const UpstreamPool& pool, std::span<const std::string> keys,
              std::span<SharedLimit* const> limits = {});

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
    // in flight count towards full() and least-active): it takes a unit of m's limit,
    // and nothing is counted when there is no room left (Taken::No: another shard took
    // it since choose()). It ends (its connect failed or it closed): closed() with what
    // opened() answered; a unit taken is given back, and the caller wakes the shards
    // that want room at m's limit (ShardDoorbells).
    SharedLimit::Taken opened(std::size_t m);
    void closed(std::size_t m, SharedLimit::Taken taken);
    bool full(std::size_t m) const;
    SharedLimit& limit(std::size_t m) const { return *members_[m].limit; }

    // After choose() found nothing: whether a member would have been chosen but for
    // being full (a client may wait for it, as HAProxy queues for a full server).
    bool only_full_left(const TriedSet& tried, Clock::time_point now) const;

    // Passive health (PassiveHealthState): the outcome of a connect to `m`. Each returns
    // true when it changes whether `m` is marked down, the moment to log it: failed, on
    // the `fall`-th failure in a row; succeeded, when a marked member connects again.
    // Failed trials while marked down extend the backoff and return false.
    // A marked member that connects again starts its slow start at `now`.
    bool connect_failed(std::size_t m, Clock::time_point now);
    bool connect_succeeded(std::size_t m, Clock::time_point now = {});

    // The engine-wide active health checker's verdict on `m` (up until it says
    // otherwise). Returns true when it changed; a member that comes up starts its slow
    // start at `now`.
    bool set_checked_up(std::size_t m, bool up, Clock::time_point now = {});

    // Whether `m` may be chosen at `now` as far as health goes: the checker has it up
    // and passive health has it neither down nor in its backoff.
    bool up(std::size_t m, Clock::time_point now) const;

    // Runtime control (runtime.hpp). Only a Ready member is a candidate; one set Ready
    // from Drain or Maint starts its slow start at `now`. Returns true when it changed.
    bool set_state(std::size_t m, MemberState state, Clock::time_point now);
    MemberState state(std::size_t m) const { return members_[m].state; }
    // 1..1000 (0 counts as 1); Maglev builds its tables again.
    void set_weight(std::size_t m, unsigned weight);
    void set_slow_start(std::size_t m, std::chrono::milliseconds ramp) {
        members_[m].slow_start = ramp;
    }
    // Starts (or restarts) m's slow start at `from`.
    void begin_ramp(std::size_t m, Clock::time_point from) { members_[m].ramp_from = from; }
    // What balancing gives `m` at `now`, in its weight's units: 0 while it is not a
    // candidate for health or state, during slow start its ramp's value (rounded), else
    // its weight (Engine::members()).
    unsigned effective_weight(std::size_t m, Clock::time_point now) const;

private:
    // Whether choose() takes backups now: no primary is available and untried.
    bool backups_only(const TriedSet& tried, Clock::time_point now) const;
    // Up, and Ready: what a new connection may go to, but for limits and its tries.
    bool available(std::size_t m, Clock::time_point now) const {
        return members_[m].state == MemberState::Ready && up(m, now);
    }
    // m's weight for round-robin and least-active at `now`, in 1/kWeightScale units of
    // a configured weight, so that a ramp climbs in fine steps even for weight 1; at
    // least 1 (a member ramping up gets a trickle from its first moment).
    uint64_t pick_weight(std::size_t m, Clock::time_point now) const;
    void build_tables();

    static constexpr uint64_t kWeightScale = 1000;

    std::vector<std::unique_ptr<SharedLimit>> own_limits_; // when none were given
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
    std::vector<std::string> keys_; // Maglev's, by member
};

} // namespace uringfwd::engine
