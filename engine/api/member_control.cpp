// Runtime control of pool members (Engine::set_member_state(), set_member_weight(),
// add_member(), remove_member(), members()): a state or weight is applied on every shard
// through its mailbox, one after the other, and kept in runtime_ so that a reload gives
// it to the new routes (keep_runtime_settings()); a member added or removed is a
// reconfiguration of the one route, as update_pool() does it.
#include "api/engine_impl.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace uringfwd {

namespace {

constexpr unsigned kMaxWeight = 1000; // as the configuration file takes it

std::string member_list(const engine::Route& route) {
    std::string out;
    for (const engine::MemberRoute& m : route.members)
        out += fmt::format("{}{}", out.empty() ? "" : ", ", m.name);
    return out;
}

// The key a member of the configuration has (MemberRoute::name).
std::string key_of(const UpstreamMember& m) {
    return m.name.empty() ? m.address.to_string() : m.name;
}

} // namespace

EngineConfig Engine::Impl::served_config() const {
    EngineConfig next = current_;
    next.routes = engine::effective_routes(next);
    for (RouteConfig& route : next.routes) {
        std::vector<Endpoint> bound;
        for (const PlannedListener& l : listeners_)
            if (!l.closed && serves(l, route.name))
                bound.push_back(engine::to_endpoint(l.address));
        for (Endpoint& e : route.listen) {
            if (e.is_unix() || e.port != 0)
                continue;
            auto it = std::find_if(bound.begin(), bound.end(), [&](const Endpoint& b) {
                const bool same_host =
                    b.host == e.host || (e.host.empty() && (b.host == "0.0.0.0" || b.host == "::"));
                return b.kind == e.kind && same_host && b.port != 0 &&
                       std::find(route.listen.begin(), route.listen.end(), b) == route.listen.end();
            });
            if (it != bound.end()) {
                e = *it;
                bound.erase(it);
            }
        }
    }
    return next;
}

bool Engine::Impl::on_every_shard(const std::function<void(engine::Shard&)>& task) const {
    for (const auto& shard : shards_) {
        engine::Shard* s = shard.get();
        if (!s->call([s, &task] { task(*s); }))
            return false;
    }
    return true;
}

Engine::Impl::MemberPlace Engine::Impl::find_member(std::string_view route,
                                                    std::string_view member) const {
    MemberPlace place;
    const auto& routes = routes_->routes;
    auto r = std::find_if(routes.begin(), routes.end(),
                          [&](const engine::Route& each) { return each.name == route; });
    if (r == routes.end()) {
        std::string names;
        for (const engine::Route& each : routes)
            names += fmt::format("{}{}", names.empty() ? "" : ", ", each.name);
        place.error = fmt::format("no route {}; routes: {}", route, names);
        return place;
    }
    place.route = static_cast<std::size_t>(r - routes.begin());
    // Its key first; then, for an operator who names it by address, the one member
    // with that address as written or as resolved.
    const std::function<std::string(std::size_t)> ways[] = {
        [&](std::size_t m) { return r->members[m].name; },
        [&](std::size_t m) { return r->pool.members[m].address.to_string(); },
        [&](std::size_t m) { return engine::to_endpoint(r->members[m].address).to_string(); },
    };
    for (const auto& way : ways) {
        std::size_t found = 0;
        for (std::size_t m = 0; m < r->members.size(); ++m) {
            if (way(m) == member) {
                place.member = m;
                ++found;
            }
        }
        if (found == 1)
            return place;
        if (found > 1) {
            place.error = fmt::format("{} members of route {} have the address {}; name one of "
                                      "them: {}",
                                      found, route, member, member_list(*r));
            return place;
        }
    }
    place.error =
        fmt::format("no member {} in route {}; its members: {}", member, route, member_list(*r));
    return place;
}

ChangeResult Engine::Impl::change_member(std::string_view route, std::string_view member,
                                         const MemberChange& record, const ShardChangeOf& apply,
                                         const std::string& done) {
    std::lock_guard lock(plan_mu_);
    MemberPlace place = find_member(route, member);
    if (!place.error.empty())
        return {false, place.error};
    const engine::Route& r = routes_->routes[place.route];
    const engine::MemberRoute& m = r.members[place.member];
    RuntimeSetting& setting = runtime_[{r.name, m.name}];
    record(r, place.member, setting);
    if (setting.empty())
        runtime_.erase({r.name, m.name});
    const std::size_t index = place.member;
    if (!on_every_shard([&](engine::Shard& s) { apply(s, r.name, index); }))
        return {false, "the engine has stopped"};
    log_.info("route \"{}\": member {} {}", r.name, m.name, done);
    return {true, {}};
}

ChangeResult Engine::Impl::set_member_state(std::string_view route, std::string_view member,
                                            MemberState state) {
    const auto record = [&](const engine::Route& r, std::size_t m, RuntimeSetting& setting) {
        // Ready is what the configuration says of every member: no runtime state then.
        setting.state = state == MemberState::Ready ? std::nullopt : std::optional(state);
        // Before the shards: a check due meanwhile would still probe a member taken out.
        if (const int target = r.members[m].health_target; target >= 0 && routes_->health)
            routes_->health->set_paused(static_cast<std::size_t>(target),
                                        state == MemberState::Maint);
    };
    return change_member(
        route, member, record,
        [&](engine::Shard& s, const std::string& r, std::size_t m) {
            s.set_member_state(r, m, state);
        },
        fmt::format("set to {}", to_string(state)));
}

ChangeResult Engine::Impl::set_member_weight(std::string_view route, std::string_view member,
                                             unsigned weight) {
    if (weight < 1 || weight > kMaxWeight)
        return {false, fmt::format("weight must be 1..{}, not {}", kMaxWeight, weight)};
    const auto record = [&](const engine::Route& r, std::size_t m, RuntimeSetting& setting) {
        setting.weight = weight;
        setting.configured_weight = r.pool.members[m].weight;
    };
    return change_member(
        route, member, record,
        [&](engine::Shard& s, const std::string& r, std::size_t m) {
            s.set_member_weight(r, m, weight);
        },
        fmt::format("weight set to {}", weight));
}

ChangeResult Engine::Impl::add_member(std::string_view route, UpstreamMember member) {
    if (member.weight < 1 || member.weight > kMaxWeight)
        return {false, fmt::format("weight must be 1..{}, not {}", kMaxWeight, member.weight)};
    std::lock_guard lock(plan_mu_);
    EngineConfig next = served_config();
    auto r = std::find_if(next.routes.begin(), next.routes.end(),
                          [&](const RouteConfig& each) { return each.name == route; });
    if (r == next.routes.end())
        return {false, find_member(route, {}).error};
    const std::string key = key_of(member);
    for (const UpstreamMember& each : r->pool.members)
        if (key_of(each) == key)
            return {false, fmt::format("route {} has a member {} already{}", route, key,
                                       member.name.empty()
                                           ? "; give it a name to connect to one address twice"
                                           : "")};
    r->pool.members.push_back(std::move(member));
    ReloadResult result = reconfigure_locked(std::move(next));
    if (!result.applied)
        return {false, result.errors.empty() ? std::string("refused") : result.errors.front()};
    log_.info("route \"{}\": member {} added", route, key);
    return {true, {}};
}

ChangeResult Engine::Impl::remove_member(std::string_view route, std::string_view member) {
    std::lock_guard lock(plan_mu_);
    MemberPlace place = find_member(route, member);
    if (!place.error.empty())
        return {false, place.error};
    const std::string key = routes_->routes[place.route].members[place.member].name;
    EngineConfig next = served_config();
    auto r = std::find_if(next.routes.begin(), next.routes.end(),
                          [&](const RouteConfig& each) { return each.name == route; });
    if (r == next.routes.end())
        return {false, find_member(route, member).error};
    if (r->pool.members.size() == 1)
        return {false,
                fmt::format("{} is the last member of route {}: a route needs one", key, route)};
    std::erase_if(r->pool.members, [&](const UpstreamMember& m) { return key_of(m) == key; });
    ReloadResult result = reconfigure_locked(std::move(next));
    if (!result.applied)
        return {false, result.errors.empty() ? std::string("refused") : result.errors.front()};
    log_.info("route \"{}\": member {} removed", route, key);
    return {true, {}};
}

void Engine::Impl::keep_runtime_settings(engine::RouteTable& table) const {
    for (engine::Route& route : table.routes) {
        for (std::size_t m = 0; m < route.members.size(); ++m) {
            engine::MemberRoute& member = route.members[m];
            auto it = runtime_.find({route.name, member.name});
            if (it == runtime_.end())
                continue;
            member.state = it->second.state.value_or(MemberState::Ready);
            if (it->second.weight && route.pool.members[m].weight == it->second.configured_weight)
                member.runtime_weight = it->second.weight;
        }
    }
}

void Engine::Impl::prune_runtime_settings() {
    // Whether `setting` of `key` still says something of a member routes_ serves.
    const auto still_holds = [&](const MemberKey& key, RuntimeSetting& setting) {
        for (const engine::Route& route : routes_->routes) {
            if (route.name != key.first)
                continue;
            for (std::size_t m = 0; m < route.members.size(); ++m) {
                if (route.members[m].name != key.second)
                    continue;
                const unsigned configured = route.pool.members[m].weight;
                if (setting.weight && configured != setting.configured_weight) {
                    log_.info("route \"{}\": member {}: the configuration's weight {} replaces "
                              "the one set at runtime ({})",
                              route.name, key.second, configured, *setting.weight);
                    setting.weight.reset();
                }
                return !setting.empty();
            }
        }
        return false; // no longer served
    };
    for (auto it = runtime_.begin(); it != runtime_.end();)
        it = still_holds(it->first, it->second) ? std::next(it) : runtime_.erase(it);
}

std::vector<MemberInfo> Engine::Impl::members(std::string_view route) const {
    std::vector<MemberInfo> out;
    {
        std::lock_guard lock(plan_mu_);
        if (!routes_)
            return out;
        for (const engine::Route& r : routes_->routes) {
            if (!route.empty() && r.name != route)
                continue;
            for (std::size_t m = 0; m < r.members.size(); ++m) {
                const engine::MemberRoute& member = r.members[m];
                MemberInfo info;
                info.route = r.name;
                info.member = member.name;
                info.address = r.pool.members[m].address.to_string();
                info.backup = r.pool.members[m].backup;
                info.weight = r.pool.members[m].weight;
                if (auto it = runtime_.find({r.name, member.name}); it != runtime_.end()) {
                    info.state = it->second.state.value_or(MemberState::Ready);
                    info.weight = it->second.weight.value_or(info.weight);
                    info.state_source = "runtime";
                }
                if (member.health_target >= 0 && routes_->health)
                    info.health =
                        routes_->health->up(static_cast<std::size_t>(member.health_target))
                            ? MemberHealthState::Up
                            : MemberHealthState::Down;
                info.effective_weight = 0; // the largest a shard uses (add_member_stats)
                out.push_back(std::move(info));
            }
        }
    }
    if (!on_every_shard([&](engine::Shard& s) { s.add_member_stats(out); }))
        return {};
    return out;
}

engine::HealthChecker::OnChange Engine::Impl::health_watch() {
    return [this](std::size_t, bool up) {
        // Before launch() has made every shard there is nothing to reset.
        if (up || !shards_made_.load(std::memory_order_acquire))
            return;
        for (const auto& shard : shards_) {
            engine::Shard* s = shard.get();
            s->post([s] { s->close_down_members(); });
        }
    };
}

} // namespace uringfwd
