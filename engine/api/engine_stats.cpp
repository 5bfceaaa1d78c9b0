// What the stats getters read: each route's counters from every shard (asked one after
// the other, on their own threads), the engine-wide per-source table, and the health
// checker's view of the members.
#include "api/engine_impl.hpp"

#include "routing/route_table.hpp"
#include "routing/source_limits.hpp"
#include "shard/shard.hpp"

#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

namespace uringfwd {

std::vector<RouteStats> Engine::Impl::route_stats() const {
    std::vector<RouteStats> out;
    {
        // The configuration's order, whatever order the shards answer in.
        std::lock_guard lock(plan_mu_);
        for (const engine::Route& route : routes_->routes) {
            RouteStats r;
            r.name = route.name;
            for (const engine::MemberRoute& m : route.members)
                r.members.push_back({m.name});
            out.push_back(std::move(r));
        }
    }
    std::set<uint64_t> queues_counted; // shards are asked one after the other
    for (const auto& shard : shards_) {
        engine::Shard* s = shard.get();
        std::function<void()> collect = [s, &out, &queues_counted] {
            s->add_route_stats(out, queues_counted);
        };
        if (!s->call(collect))
            return {};
    }
    return out;
}

SourceTableStats Engine::Impl::source_table_stats() const {
    std::shared_ptr<engine::SourceTable> table;
    {
        std::lock_guard lock(plan_mu_);
        table = routes_ ? routes_->sources : nullptr;
    }
    if (!table)
        return {};
    return {table->capacity(), table->tracked(engine::SourceTable::Clock::now()),
            table->evictions(), table->untracked()};
}

std::vector<MemberHealth> Engine::Impl::member_health() const {
    std::lock_guard lock(plan_mu_);
    std::vector<MemberHealth> out;
    for (const engine::Route& route : routes_->routes) {
        for (const engine::MemberRoute& member : route.members) {
            if (member.health_target < 0)
                continue;
            auto s = routes_->health->stats(static_cast<std::size_t>(member.health_target));
            out.push_back({route.name, member.name, s.up, s.checks, s.failures, s.transitions});
        }
    }
    return out;
}

} // namespace uringfwd
