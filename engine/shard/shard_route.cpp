#include "shard/shard_route.hpp"

#include <algorithm>

namespace uringfwd::engine {

namespace {

// Passive health needs somewhere else to go: marking the only member down would turn
// its slow refusals into fast ones and delay its recovery, so a pool of one is always
// tried.
UpstreamPool with_passive_health_where_useful(UpstreamPool pool) {
    if (pool.members.size() < 2)
        pool.passive.fall = 0;
    return pool;
}

std::vector<SharedLimit*> member_limits(const Route& route) {
    std::vector<SharedLimit*> limits;
    for (const MemberRoute& m : route.members)
        limits.push_back(m.limit.get());
    return limits;
}

std::vector<std::string> member_keys(const Route& route) {
    std::vector<std::string> keys;
    for (const MemberRoute& m : route.members)
        keys.push_back(m.name);
    return keys;
}

} // namespace

ShardRoute::ShardRoute(const Route& r, std::shared_ptr<const RouteTable> t, std::size_t shard_index)
    : table(std::move(t)), route(r), shard(shard_index),
      pool(with_passive_health_where_useful(r.pool), member_keys(r), member_limits(r)),
      inspectors(make_inspectors(r)), connects(r.members.size(), 0), failures(r.members.size(), 0),
      source_turns(r.members.size() + 1, 0), failures_by(r.members.size()),
      member_bytes_to_upstream(r.members.size(), 0), member_bytes_to_client(r.members.size(), 0) {
    for (std::size_t m = 0; m < r.members.size(); ++m) {
        const MemberRoute& member = r.members[m];
        pool.set_slow_start(m, member.slow_start);
        pool.begin_ramp(m, member.ramp_from);
        pool.set_state(m, member.state, member.ramp_from);
        if (member.runtime_weight)
            pool.set_weight(m, *member.runtime_weight);
    }
}

void ShardRoute::want_member_room() {
    if (wanting_members)
        return;
    wanting_members = true;
    for (const MemberRoute& m : route.members)
        m.limit->want(shard);
}

void ShardRoute::stop_wanting_member_room() {
    if (!wanting_members)
        return;
    wanting_members = false;
    for (const MemberRoute& m : route.members)
        m.limit->unwant(shard);
}

void ShardRoute::refresh_health(std::chrono::steady_clock::time_point now) {
    if (!table->health)
        return;
    for (std::size_t m = 0; m < route.members.size(); ++m)
        if (int target = route.members[m].health_target; target >= 0)
            pool.set_checked_up(m, table->health->up(static_cast<std::size_t>(target)), now);
}

void ShardRoute::keep_ramps_of(const ShardRoute& old) {
    for (std::size_t m = 0; m < route.members.size(); ++m)
        for (std::size_t o = 0; o < old.route.members.size(); ++o)
            if (old.route.members[o].name == route.members[m].name)
                pool.begin_ramp(m,
                                std::max(pool.member(m).ramp_from, old.pool.member(o).ramp_from));
}

std::chrono::milliseconds ShardRoute::connect_deadline() const {
    if (route.pool.connect_deadline.count() > 0)
        return route.pool.connect_deadline;
    return route.pool.connect_timeout * (route.pool.retries + 1);
}

} // namespace uringfwd::engine
