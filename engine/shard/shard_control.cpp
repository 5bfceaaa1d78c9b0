// Runtime control on a running shard (Engine::set_member_state(), members(),
// connections(), ...): each runs on the shard's own thread, from a task its mailbox
// runs between two batches of completions, so the shard's pools and connections are
// touched by it alone.
#include "shard/shard.hpp"

#include "support/plural.hpp"

#include <algorithm>

namespace uringfwd::engine {

bool Shard::post(std::function<void()> task) {
    return mailbox_.post(std::move(task));
}

ShardRoute* Shard::current_route(std::string_view name) {
    for (auto& route : routes_)
        if (route->route.name == name)
            return route.get();
    return nullptr;
}

bool Shard::set_member_state(std::string_view route, std::size_t member, MemberState state) {
    ShardRoute* r = current_route(route);
    if (r == nullptr || member >= r->pool.size())
        return false;
    r->pool.set_state(member, state, std::chrono::steady_clock::now());
    return true;
}

bool Shard::set_member_weight(std::string_view route, std::size_t member, unsigned weight) {
    ShardRoute* r = current_route(route);
    if (r == nullptr || member >= r->pool.size())
        return false;
    r->pool.set_weight(member, weight);
    return true;
}

void Shard::add_member_stats(std::vector<MemberInfo>& out) const {
    const auto now = std::chrono::steady_clock::now();
    for (const auto* routes : {&routes_, &retired_routes_}) {
        const bool current = routes == &routes_;
        for (const auto& shard_route : *routes) {
            const Route& route = shard_route->route;
            for (std::size_t m = 0; m < route.members.size(); ++m) {
                auto it = std::find_if(out.begin(), out.end(), [&](const MemberInfo& info) {
                    return info.route == route.name && info.member == route.members[m].name;
                });
                if (it == out.end())
                    continue; // a member a reload removed, while its connections drain
                it->open += shard_route->pool.member(m).active;
                it->connects += shard_route->connects[m];
                it->failures += shard_route->failures[m];
                if (!current)
                    continue;
                it->effective_weight =
                    std::max(it->effective_weight, shard_route->pool.effective_weight(m, now));
                // Without an active check, passive health is all there is to say.
                if (route.members[m].health_target < 0 && !shard_route->pool.up(m, now))
                    it->health = MemberHealthState::Down;
            }
        }
    }
}

void Shard::add_connections(std::vector<OpenConnection>& out, const ConnectionFilter& filter,
                            std::size_t limit) {
    connections_->snapshot(out, filter, limit);
}

bool Shard::close_connection(uint64_t id) {
    return connections_->close_by_id(id, CloseReason::Admin);
}

std::size_t Shard::close_connections(std::string_view route, std::string_view member) {
    return connections_->close_where(route, member, CloseReason::Admin);
}

void Shard::close_down_members() {
    const auto now = std::chrono::steady_clock::now();
    for (auto& r : routes_) {
        if (r->route.on_member_down != OnMemberDown::Close || !r->table->health)
            continue;
        r->refresh_health(now);
        const HealthChecker& health = *r->table->health;
        // Whether the current checker has the member of that name down: connections
        // opened before a reload (a retired route's) are judged by it too.
        const auto down = [&](const std::string& name) {
            for (const MemberRoute& m : r->route.members)
                if (m.name == name && m.health_target >= 0)
                    return !health.up(static_cast<std::size_t>(m.health_target));
            return false;
        };
        std::size_t closed = 0;
        for (const auto* routes : {&routes_, &retired_routes_})
            for (const auto& each : *routes)
                if (each->route.name == r->route.name)
                    closed += connections_->close_forwarding_to(
                        *each, [&](std::size_t m) { return down(each->route.members[m].name); },
                        CloseReason::MemberDown);
        if (closed > 0)
            log_.info("route \"{}\": reset {} of a member that went down (on_member_down = close)",
                      r->route.name, count_of(closed, "connection"));
    }
}

void Shard::close_removed_members(const ShardRoute& old) {
    const ShardRoute* now = current_route(old.route.name);
    if (now == nullptr || now->route.on_member_down != OnMemberDown::Close)
        return;
    const std::vector<MemberRoute>& kept = now->route.members;
    const std::size_t closed = connections_->close_forwarding_to(
        old,
        [&](std::size_t m) {
            return std::none_of(kept.begin(), kept.end(), [&](const MemberRoute& k) {
                return k.name == old.route.members[m].name;
            });
        },
        CloseReason::MemberDown);
    if (closed > 0)
        log_.info("route \"{}\": reset {} of members it no longer has (on_member_down = close)",
                  old.route.name, count_of(closed, "connection"));
}

} // namespace uringfwd::engine
