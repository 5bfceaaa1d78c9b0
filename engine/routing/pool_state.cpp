#include "routing/pool_state.hpp"

#include <algorithm>
#include <stdexcept>

namespace uringfwd::engine {

namespace {

// Builds the table of the members whose `backup` flag is `backup`, and the pool index of
// each table index.
MaglevTable build_table(const UpstreamPool& pool, std::span<const std::string> keys, bool backup,
                        std::vector<uint32_t>& ids) {
    std::vector<MaglevTable::Member> members;
    for (std::size_t i = 0; i < pool.members.size(); ++i) {
        if (pool.members[i].backup != backup)
            continue;
        members.push_back({keys[i], pool.members[i].weight});
        ids.push_back(static_cast<uint32_t>(i));
    }
    return MaglevTable(members);
}

// a.active / a.weight < b.active / b.weight, without division.
bool less_loaded(const PoolState::Member& a, const PoolState::Member& b) {
    return a.active * b.weight < b.active * a.weight;
}

bool equally_loaded(const PoolState::Member& a, const PoolState::Member& b) {
    return a.active * b.weight == b.active * a.weight;
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
        primary_table_ = build_table(pool, keys, false, primary_ids_);
        backup_table_ = build_table(pool, keys, true, backup_ids_);
    }
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

bool PoolState::connect_succeeded(std::size_t m) {
    return members_[m].passive.succeeded();
}

bool PoolState::set_checked_up(std::size_t m, bool up) {
    const bool changed = members_[m].checked_up != up;
    members_[m].checked_up = up;
    return changed;
}

bool PoolState::backups_only(const TriedSet& tried, Clock::time_point now) const {
    // A primary this connection has tried (it refused or timed out) is no primary left
    // for it, though it still counts as up: passive health marks it down only on its
    // `fall`-th failure and the checker on its next check. So its retry may go to a
    // backup at once rather than resetting the client (issue 20).
    for (std::size_t i = 0; i < members_.size(); ++i)
        if (!members_[i].backup && up(i, now) && !tried.contains(i))
            return false;
    return true;
}

bool PoolState::only_full_left(const TriedSet& tried, Clock::time_point now) const {
    const bool backups = backups_only(tried, now);
    for (std::size_t i = 0; i < members_.size(); ++i)
        if (members_[i].backup == backups && up(i, now) && !tried.contains(i) && full(i))
            return true;
    return false;
}

std::optional<std::size_t> PoolState::choose(uint64_t client_hash, const TriedSet& tried,
                                             Clock::time_point now) {
    const bool backups = backups_only(tried, now);
    const auto candidate = [&](std::size_t i) {
        return members_[i].backup == backups && up(i, now) && !full(i) && !tried.contains(i);
    };
    const auto weight = [&](std::size_t i) { return members_[i].weight; };

    switch (policy_) {
    case BalancePolicy::RoundRobin:
        return wrr_.pick(weight, candidate);
    case BalancePolicy::LeastActive: {
        std::optional<std::size_t> best;
        for (std::size_t i = 0; i < members_.size(); ++i)
            if (candidate(i) && (!best || less_loaded(members_[i], members_[*best])))
                best = i;
        if (!best)
            return std::nullopt;
        // Equally loaded members share by weight, as nginx's least_conn does
        // (ngx_http_upstream_get_least_conn_peer() in
        // src/http/modules/ngx_http_upstream_least_conn_module.c): otherwise the lowest
        // index would win every tie, and short connections (all at 0 active) would all
        // go to one member.
        const Member& least = members_[*best];
        return wrr_.pick(weight, [&](std::size_t i) {
            return candidate(i) && equally_loaded(members_[i], least);
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
