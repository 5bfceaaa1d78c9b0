// Reconfiguring a running shard (Engine::reconfigure): new routes for new connections,
// listeners added and removed, while open connections keep what they have.
#include "net/listen_queue.hpp"
#include "shard/connection/connection_deadlines.hpp"
#include "shard/shard.hpp"

#include <algorithm>

namespace uringfwd::engine {

std::string Shard::apply_change(ShardChange change) {
    std::optional<std::string> answer = mailbox_.await(
        [&] { return stopping_ ? std::string("the engine is stopping") : apply(change); });
    return answer ? std::move(*answer) : std::string("the shard has stopped");
}

std::string Shard::apply(ShardChange& change) {
    // Bind the new listeners first: when one cannot be had, nothing has changed yet
    // (the ones made so far close with `added`).
    std::vector<std::unique_ptr<Listener>> added;
    try {
        for (ListenerSetup setup : change.new_listeners) {
            setup.direct = context_->direct;
            added.push_back(std::make_unique<Listener>(*io_, log_, setup));
        }
    } catch (const std::exception& e) {
        return e.what();
    }
    // The old routes stay, retired, for the connections that still point at them.
    const std::size_t first_retired = retired_routes_.size();
    for (auto& route : routes_) {
        // Its listeners move to the new route (or close): only its waiting clients
        // still want room at its limit.
        route->retired = true;
        route->held = false;
        if (route->waiting.empty())
            route->stop_wanting();
        retired_routes_.push_back(std::move(route));
    }
    routes_.clear();
    for (const Route& route : change.routes->routes)
        routes_.push_back(std::make_unique<ShardRoute>(route, change.routes,
                                                       static_cast<std::size_t>(setup_.index)));
    setup_.routes = change.routes;
    make_group_inspectors();
    for (std::size_t i = first_retired; i < retired_routes_.size(); ++i) {
        if (ShardRoute* now = current_route(retired_routes_[i]->route.name))
            now->keep_ramps_of(*retired_routes_[i]);
        close_removed_members(*retired_routes_[i]);
    }

    // An address kept keeps its socket, so no client of it is ever refused; its
    // clients go to the new route from now on.
    for (std::size_t i = 0; i < listeners_.size(); ++i) {
        Listener& listener = *listeners_[i];
        if (listener.stopped())
            continue;
        int route = i < change.listener_routes.size() ? change.listener_routes[i] : -1;
        if (route < 0)
            listener.stop(); // its open connections go on, as on stop()
        else
            listener.move_to_route(static_cast<uint32_t>(route), change.listener_groups[i]);
    }
    for (auto& listener : added) {
        bound_.push_back(listener->bound());
        listener_fds_.push_back(listener->fd());
        listener->start();
        listeners_.push_back(std::move(listener));
    }
    plan_budget();
    plan_idle_sweep();
    arm_idle_sweep();
    prune_retired_routes();
    return {};
}

void Shard::prune_retired_routes() {
    std::size_t pruned =
        std::erase_if(retired_routes_, [](const std::unique_ptr<ShardRoute>& route) {
            return route->active == 0 && route->waiting.empty();
        });
    if (pruned == 0)
        return;
    // A pruned route cleared this shard's bits at the limits it shares with the routes
    // that replaced it (same names): set them again for those that still wait.
    for (auto* routes : {&routes_, &retired_routes_})
        for (auto& route : *routes) {
            if (route->wanting)
                route->route.limit->want(route->shard);
            if (route->wanting_members)
                for (const MemberRoute& m : route->route.members)
                    m.limit->want(route->shard);
        }
}

void Shard::plan_idle_sweep() {
    idle_sweep_ = std::chrono::milliseconds{0};
    for (const auto& route : routes_) {
        auto timeout = route->route.idle_timeout;
        if (timeout.count() <= 0)
            continue;
        // A quarter of the shortest timeout: an idle connection is closed at most 25 %
        // late, and the sweep stays rare.
        auto every =
            std::clamp(timeout / 4, std::chrono::milliseconds{10}, std::chrono::milliseconds{1000});
        idle_sweep_ = idle_sweep_.count() == 0 ? every : std::min(idle_sweep_, every);
    }
    // Retired routes too: their connections still run out their max_duration.
    idle_sweep_ = with_max_duration_sweep(idle_sweep_, routes_);
    idle_sweep_ = with_max_duration_sweep(idle_sweep_, retired_routes_);
}

bool Shard::call(const std::function<void()>& task) {
    return mailbox_.await(task);
}

void Shard::add_route_stats(std::vector<RouteStats>& out,
                            std::set<uint64_t>& queues_counted) const {
    // The retired routes too, while their connections drain after a reload: their
    // series (route and member, by name) stay until the last of them has closed, with
    // those connections in `active`, rather than vanish with connections still open.
    for (const auto* routes : {&routes_, &retired_routes_})
        for (const auto& shard_route : *routes)
            add_route_stats(*shard_route, routes == &retired_routes_, out, queues_counted);
}

void Shard::add_route_stats(const ShardRoute& shard_route, bool retired,
                            std::vector<RouteStats>& out,
                            std::set<uint64_t>& queues_counted) const {
    const Route& route = shard_route.route;
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const RouteStats& r) { return r.name == route.name; });
    if (it == out.end()) {
        RouteStats fresh;
        fresh.name = route.name;
        it = out.insert(out.end(), std::move(fresh));
    }
    it->accepted += shard_route.accepted;
    it->bytes_to_upstream += shard_route.bytes_to_upstream;
    it->bytes_to_client += shard_route.bytes_to_client;
    it->active += shard_route.active;
    // The clients actually waiting: those this shard took while the route was at its
    // limit, those waiting for a full member, and those its listeners leave in the
    // backlog.
    it->waiting += shard_route.waiting.size() + shard_route.member_waiting;
    for (const auto& listener : listeners_) {
        if (retired || listener->stopped() || routes_[listener->route()].get() != &shard_route)
            continue;
        if (!queues_counted.insert(listener->socket_inode()).second)
            continue;
        it->waiting += accept_queue_length(listener->fd()).value_or(0);
    }
    for (std::size_t i = 0; i < kCloseReasonCount; ++i)
        it->closed[i] += shard_route.closed[i];
    for (std::size_t m = 0; m < route.members.size(); ++m) {
        auto member_it =
            std::find_if(it->members.begin(), it->members.end(),
                         [&](const MemberStats& s) { return s.name == route.members[m].name; });
        // A retired pool's health is no longer kept up to date: it says whether a
        // member is up only for a member the current pool has not.
        const bool says_up = !retired || member_it == it->members.end();
        if (member_it == it->members.end())
            member_it = it->members.insert(it->members.end(), MemberStats{route.members[m].name});
        MemberStats& member = *member_it;
        member.active += shard_route.pool.member(m).active;
        member.connects += shard_route.connects[m];
        member.failures += shard_route.failures[m];
        for (std::size_t f = 0; f < kConnectFailureCount; ++f)
            member.connect_failures[f] += shard_route.failures_by[m][f];
        member.bytes_to_upstream += shard_route.member_bytes_to_upstream[m];
        member.bytes_to_client += shard_route.member_bytes_to_client[m];
        if (says_up)
            member.up = member.up && shard_route.pool.up(m, std::chrono::steady_clock::now());
    }
}

void Shard::release_listeners() {
    for (auto& listener : listeners_)
        listener->release();
}

bool Shard::listeners_idle() const {
    for (const auto& listener : listeners_)
        if (!listener->in_flight().idle())
            return false;
    return true;
}

void Shard::rearm_listeners() {
    for (auto& listener : listeners_)
        if (!listener->stopped())
            listener->rearm();
}

} // namespace uringfwd::engine
