// Engine::reconfigure: a new set of routes for a running engine. Validated and resolved
// first, on the caller's thread; then shard 0 applies it (binding any new address, so a
// port that cannot be had refuses the whole change while nothing has changed yet),
// then every other shard, joining shard 0's new sockets.
#include "api/engine_impl.hpp"
#include "api/validate.hpp"

#include <fmt/format.h>

#include <cstring>

namespace uringfwd {

namespace {

bool same_address(const engine::SocketAddress& a, const engine::SocketAddress& b) {
    return a.length == b.length && std::memcmp(&a.storage, &b.storage, a.length) == 0;
}

} // namespace

std::vector<std::string> Engine::Impl::needs_restart(const EngineConfig& next) const {
    std::vector<std::string> out;
    auto check = [&out](bool same, const char* what) {
        if (!same)
            out.push_back(what);
    };
    const EngineConfig& now = config_;
    check(next.placement.shards == now.placement.shards &&
              next.placement.cpus == now.placement.cpus,
          "shards and CPUs");
    check(next.placement.steer_by_cpu == now.placement.steer_by_cpu, "steering");
    check(next.placement.worker_placement == now.placement.worker_placement &&
              next.placement.iowq_max_workers == now.placement.iowq_max_workers,
          "io-wq workers");
    check(next.data_path == now.data_path, "data path");
    check(next.splice.splice_mechanism == now.splice.splice_mechanism, "splice mechanism");
    check(next.splice.max_pipes == now.splice.max_pipes &&
              next.splice.pipe_size == now.splice.pipe_size,
          "pipes");
    check(next.copy.copy_buffers == now.copy.copy_buffers &&
              next.copy.copy_buffer_size == now.copy.copy_buffer_size &&
              next.copy.bulk_buffers == now.copy.bulk_buffers &&
              next.copy.bulk_buffer_size == now.copy.bulk_buffer_size,
          "copy buffers");
    check(next.ring.busy_poll == now.ring.busy_poll, "busy polling");
    check(next.splice.bulk_coalesce == now.splice.bulk_coalesce, "bulk coalescing");
    check(next.experimental.bulk_park == now.experimental.bulk_park, "bulk parking");
    check(next.drain_timeout == now.drain_timeout, "drain timeout");
    check(next.log_level == now.log_level, "log level");
    check(next.ring.ring_entries == now.ring.ring_entries, "ring size");
    // The table is allocated once and kept with its counts (build_route_table()).
    check(next.access.source_table_size == now.access.source_table_size, "source table size");
    return out;
}

ReloadResult Engine::Impl::reconfigure(EngineConfig next) {
    std::lock_guard lock(plan_mu_);
    return reconfigure_locked(std::move(next));
}

ReloadResult Engine::Impl::reconfigure_locked(EngineConfig next) {
    ReloadResult result;
    result.errors = engine::route_problems(next);
    if (!result.errors.empty())
        return result;
    std::shared_ptr<engine::RouteTable> table;
    try {
        table = engine::build_route_table(next, shards_.size(), routes_.get());
    } catch (const std::exception& e) {
        result.errors.push_back(e.what());
        return result;
    }
    // What was set at runtime (member_control.cpp) holds for the members still there.
    keep_runtime_settings(*table);
    try {
        engine::start_health_checks(*table, log_, health_watch());
    } catch (const std::exception& e) {
        result.errors.push_back(fmt::format("health checks: {}", e.what()));
        return result;
    }
    if (std::string error = apply_to_shards(*table, table); !error.empty()) {
        result.errors.push_back(error);
        return result; // the new checker stops with the table
    }
    // The old checker's verdicts stay readable for connections of the old routes,
    // but it checks no more.
    if (routes_->health)
        routes_->health->stop();
    engine::apply_limits(*table);
    // A limit raised makes room that no connection's close announces: every shard
    // looks at what waits.
    for (std::size_t i = 0; i < shards_.size(); ++i)
        doorbells_->ring(i);
    routes_ = table;
    prune_runtime_settings();
    current_.routes = next.routes;
    current_.listen = next.listen;
    current_.upstream = next.upstream;
    current_.connect_timeout = next.connect_timeout;
    current_.access.allow = next.access.allow; // the routes' default lists
    current_.access.deny = next.access.deny;
    names_->follow(routes_);
    result.applied = true;
    result.needs_restart = needs_restart(next);
    log_.info("reconfigured: {}", describe_routes(route_infos()));
    for (const std::string& what : result.needs_restart)
        log_.warn("reconfigure: {} changed but needs a restart; keeping the running value", what);
    return result;
}

ReloadResult Engine::Impl::update_pool(std::string_view route, UpstreamPool pool) {
    std::lock_guard lock(plan_mu_);
    // The single-route shorthand becomes the route it stands for; the route keeps the
    // port it got for a listen port 0.
    EngineConfig next = served_config();
    bool found = false;
    for (RouteConfig& each : next.routes) {
        if (each.name == route) {
            each.pool = std::move(pool);
            found = true;
        }
    }
    if (!found) {
        ReloadResult result;
        result.errors.push_back(fmt::format("no route named \"{}\"", route));
        return result;
    }
    return reconfigure_locked(std::move(next));
}

void Engine::Impl::refresh_names() {
    EngineConfig same;
    {
        std::lock_guard lock(plan_mu_);
        same = current_;
    }
    ReloadResult result = reconfigure(same);
    if (!result.applied)
        log_.warn("could not update the pools to the new addresses: {}",
                  result.errors.empty() ? "?" : result.errors.front());
}

std::string Engine::Impl::apply_to_shards(const engine::RouteTable& next,
                                          std::shared_ptr<const engine::RouteTable> table) {
    // Which of today's listeners each new address keeps; the rest are new. Routes that
    // share an address are one group with one listener (its anchor route's).
    std::vector<int> listener_routes(listeners_.size(), -1);
    std::vector<uint32_t> listener_groups(listeners_.size(), 0);
    std::vector<PlannedListener> added;
    for (std::size_t g = 0; g < next.groups.size(); ++g) {
        const engine::ListenGroup& group = next.groups[g];
        const engine::SocketAddress& address = group.address;
        bool kept = false;
        for (std::size_t l = 0; l < listeners_.size() && !kept; ++l) {
            if (!listeners_[l].closed && listener_routes[l] < 0 &&
                same_address(listeners_[l].address, address)) {
                listener_routes[l] = static_cast<int>(group.anchor);
                listener_groups[l] = static_cast<uint32_t>(g);
                kept = true;
                // The socket stays (no client is refused), set up as it was bound.
                if (!(listeners_[l].options == group.options))
                    log_.warn("reconfigure: {}: the socket's mode, user, group or dual_stack "
                              "changed but apply only when it is bound again (a restart); "
                              "keeping them",
                              engine::to_endpoint(address).to_string());
            }
        }
        for (const PlannedListener& other : added)
            if (same_address(other.address, address) && address.family() != AF_UNIX &&
                engine::to_endpoint(address).port != 0)
                return fmt::format("{} is listed twice", engine::to_endpoint(address).to_string());
        if (!kept)
            added.push_back({static_cast<uint32_t>(group.anchor), address, false,
                             static_cast<uint32_t>(g), group.options});
    }
    std::size_t first_new = listeners_.size();
    for (std::size_t i = 0; i < shards_.size(); ++i) {
        engine::ShardChange change;
        change.routes = table;
        change.listener_routes = listener_routes;
        change.listener_groups = listener_groups;
        for (std::size_t k = 0; k < added.size(); ++k) {
            engine::ListenerSetup setup;
            setup.index = static_cast<uint32_t>(first_new + k);
            setup.route = added[k].route;
            setup.group = added[k].group;
            setup.address = added[k].address;
            setup.options = added[k].options;
            setup.cpu = shards_[i]->cpu();
            bool tcp = setup.address.family() != AF_UNIX;
            setup.set_incoming_cpu = config_.placement.steer_by_cpu && tcp;
            if (i == 0 && tcp)
                setup.steering_base = steering_base_;
            else if (i > 0 && !tcp)
                setup.shared_fd = shards_[0]->listener_fd(first_new + k);
            change.new_listeners.push_back(setup);
        }
        std::string error = shards_[i]->apply_change(std::move(change));
        if (!error.empty()) {
            if (i == 0)
                return error; // nothing changed anywhere
            log_.error("shard {} could not apply the new routes: {}", i, error);
        }
        if (i == 0) // port 0 is resolved by the first bind; the others join that port
            for (std::size_t k = 0; k < added.size(); ++k)
                added[k].address = shards_[0]->bound_address(first_new + k);
    }
    for (std::size_t l = 0; l < listener_routes.size(); ++l) {
        if (listener_routes[l] < 0 && !listeners_[l].closed) {
            listeners_[l].closed = true; // shard 0 removed a socket file its bind made
        } else if (listener_routes[l] >= 0) {
            listeners_[l].route = static_cast<uint32_t>(listener_routes[l]);
            listeners_[l].group = listener_groups[l];
        }
    }
    listeners_.insert(listeners_.end(), added.begin(), added.end());
    return {};
}

} // namespace uringfwd
