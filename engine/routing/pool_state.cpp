#include "routing/pool_state.hpp"

#include <algorithm>
#include <stdexcept>

namespace uringfwd::engine {

namespace {

// Builds the table of the members whose `backup` flag is `backup`, and the pool index of
// each table index.
MaglevTable build_table(std::span<const PoolState::Member> pool, std::span<const std::string> keys,
                        bool backup, std::vector<uint32_t>& ids) {
    std::vector<MaglevTable::Member> members;
    ids.clear();
    for (std::size_t i = 0; i < pool.size(); ++i) {
        if (pool[i].backup != backup)
            continue;
        members.push_back({keys[i], pool[i].weight});
        ids.push_back(static_cast<uint32_t>(i));
    }
    return MaglevTable(members);
}

// a.active / wa < b.active / wb, without division.
bool less_loaded(std::size_t a_active, uint64_t wa, std::size_t b_active, uint64_t wb) {
    return a_active * wb < b_active * wa;
}

bool equally_loaded(std::size_t a_active, uint64_t wa, std::size_t b_active, uint64_t wb) {
    return a_active * wb == b_active * wa;
}

} // namespace

PoolState::PoolState(const UpstreamPool& pool, std::span<const std::string> keys,
                     std::span<SharedLimit* const> limits)
    : policy_(pool.balance), passive_config_(pool.passive), wrr_(pool.members.size()) {
    if (!limits.empty() && limits.size() != pool.members.size())
        throw std::invalid_argument("pool: one limit per member is needed");
    members_.reserve(pool.members.size());
    for (std::size_t i = 0; i < pool.members.size(); ++i) {
        const UpstreamMember& m = pool.members[i];
        Member state;
        // The configuration allows 1..1000; 0 would stall round-robin and make every
        // member look equally loaded to least-active.
        state.weight = std::max(1u, m.weight);
        state.backup = m.backup;
        if (limits.empty()) {
            own_limits_.push_back(std::make_unique<SharedLimit>(m.max_connections, 1));
            state.limit = own_limits_.back().get();
        } else {
            state.limit = limits[i];
        }
        members_.push_back(state);
    }
    if (policy_ == BalancePolicy::Maglev) {
        if (keys.size() != pool.members.size())
            throw std::invalid_argument("maglev: one key per pool member is needed");
        keys_.assign(keys.begin(), keys.end());
        build_tables();
    }
}

void PoolState::build_tables() {
    primary_table_ = build_table(members_, keys_, false, primary_ids_);
    backup_table_ = build_table(members_, keys_, true, backup_ids_);
}

bool PoolState::set_state(std::size_t m, MemberState state, Clock::time_point now) {
    Member& member = members_[m];
    if (member.state == state)
        return false;
    if (state == MemberState::Ready)
        member.ramp_from = now;
    member.state = state;
    return true;
}

void PoolState::set_weight(std::size_t m, unsigned weight) {
    weight = std::max(1u, weight);
    if (members_[m].weight == weight)
        return;
    members_[m].weight = weight;
    if (policy_ == BalancePolicy::Maglev)
        build_tables();
}

uint64_t PoolState::pick_weight(std::size_t m, Clock::time_point now) const {
    const Member& member = members_[m];
    const uint64_t full = uint64_t{member.weight} * kWeightScale;
    if (member.slow_start.count() <= 0 || now < member.ramp_from)
        return full;
    const auto elapsed = now - member.ramp_from;
    if (elapsed >= member.slow_start)
        return full;
    const auto part = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(elapsed).count());
    const auto whole = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(member.slow_start).count());
    return std::max<uint64_t>(1, full * part / whole);
}

unsigned PoolState::effective_weight(std::size_t m, Clock::time_point now) const {
    if (!available(m, now))
        return 0;
    if (policy_ == BalancePolicy::Maglev)
        return members_[m].weight;
    return static_cast<unsigned>((pick_weight(m, now) + kWeightScale / 2) / kWeightScale);
}

SharedLimit::Taken PoolState::opened(std::size_t m) {
    SharedLimit::Taken taken = members_[m].limit->try_take();
    if (taken != SharedLimit::Taken::No)
        ++members_[m].active;
    return taken;
}

void PoolState::closed(std::size_t m, SharedLimit::Taken taken) {
    if (taken == SharedLimit::Taken::No)
        return;
    if (members_[m].active > 0)
        --members_[m].active;
    if (taken == SharedLimit::Taken::Counted)
        members_[m].limit->give_back();
}

bool PoolState::full(std::size_t m) const {
    return members_[m].limit->full();
}

bool PoolState::up(std::size_t m, Clock::time_point now) const {
    return members_[m].checked_up && !members_[m].passive.down(now);
}

bool PoolState::connect_failed(std::size_t m, Clock::time_point now) {
    return members_[m].passive.failed(passive_config_, now);
}

bool PoolState::connect_succeeded(std::size_t m, Clock::time_point now) {
    const bool back = members_[m].passive.succeeded();
    if (back)
        members_[m].ramp_from = now;
    return back;
}

bool PoolState::set_checked_up(std::size_t m, bool up, Clock::time_point now) {
    const bool changed = members_[m].checked_up != up;
    members_[m].checked_up = up;
    if (changed && up)
        members_[m].ramp_from = now;
    return changed;
}

bool PoolState::backups_only(const TriedSet& tried, Clock::time_point now) const {
    // A primary this connection has tried (it refused or timed out) is no primary left
    // for it, though it still counts as up: passive health marks it down only on its
    // `fall`-th failure and the checker on its next check. So its retry may go to a
    // backup at once rather than resetting the client (issue 20).
    for (std::size_t i = 0; i < members_.size(); ++i)
        if (!members_[i].backup && available(i, now) && !tried.contains(i))
            return false;
    return true;
}

bool PoolState::only_full_left(const TriedSet& tried, Clock::time_point now) const {
    const bool backups = backups_only(tried, now);
    for (std::size_t i = 0; i < members_.size(); ++i)
        if (members_[i].backup == backups && available(i, now) && !tried.contains(i) && full(i))
            return true;
    return false;
}

std::optional<std::size_t> PoolState::choose(uint64_t client_hash, const TriedSet& tried,
                                             Clock::time_point now) {
    const bool backups = backups_only(tried, now);
    const auto candidate = [&](std::size_t i) {
        return members_[i].backup == backups && available(i, now) && !full(i) && !tried.contains(i);
    };
    const auto weight = [&](std::size_t i) { return pick_weight(i, now); };

    switch (policy_) {
    case BalancePolicy::RoundRobin:
        return wrr_.pick(weight, candidate);
    case BalancePolicy::LeastActive: {
        std::optional<std::size_t> best;
        uint64_t best_weight = 0;
        for (std::size_t i = 0; i < members_.size(); ++i) {
            if (!candidate(i))
                continue;
            const uint64_t w = weight(i);
            if (!best || less_loaded(members_[i].active, w, members_[*best].active, best_weight)) {
                best = i;
                best_weight = w;
            }
        }
        if (!best)
            return std::nullopt;
        // Equally loaded members share by weight, as nginx's least_conn does
        // (ngx_http_upstream_get_least_conn_peer() in
        // src/http/modules/ngx_http_upstream_least_conn_module.c): otherwise the lowest
        // index would win every tie, and short connections (all at 0 active) would all
        // go to one member.
        const std::size_t least_active = members_[*best].active;
        return wrr_.pick(weight, [&](std::size_t i) {
            return candidate(i) &&
                   equally_loaded(members_[i].active, weight(i), least_active, best_weight);
        });
    }
    case BalancePolicy::Maglev: {
        const MaglevTable& table = backups ? backup_table_ : primary_table_;
        const std::vector<uint32_t>& ids = backups ? backup_ids_ : primary_ids_;
        // With no candidate the walk would visit all M entries to find nothing; this
        // check is O(members), like the other policies' picks.
        if (std::none_of(ids.begin(), ids.end(), candidate))
            return std::nullopt;
        const auto found =
            table.find(client_hash, [&](std::size_t t) { return candidate(ids[t]); });
        if (!found)
            return std::nullopt;
        return ids[*found];
    }
    }
    return std::nullopt;
}

} // namespace uringfwd::engine
