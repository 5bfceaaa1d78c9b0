// Letting clients in: a listener's new client, or one handed over, is opened on its
// route at once, or waits while the route is at its connection limit (its listeners
// then hold off accepting); a connection that goes makes room for the next, on its own
// shard at once and on the others through their doorbells (the limit is the engine's:
// routing/shared_limit.hpp).
#include "shard/shard.hpp"

namespace uringfwd::engine {

void Shard::open_connection(Listener& listener, int client_fd, bool fd_unit_taken) {
    ShardRoute& route = *routes_[listener.route()];
    // A plain fd takes a unit of the fd limit's connections, a slot (or a plain client
    // whose upstream goes into a slot) one of the file table's; an upstream bound to a
    // source address is a plain fd whatever the client is (Route::plain_upstreams).
    SocketUnits units = take_units(!listener.direct() || route.route.plain_upstreams,
                                   /*slot=*/true, fd_unit_taken);
    WaitingClient client{
        .client = listener.direct() ? UnservedSocket::in_slot(client_fd, slot_closer_)
                                    : UnservedSocket::plain(client_fd),
        .set_no_delay = listener.clients_need_no_delay(),
        .inspect = true,
        .listener_inspector = group_inspectors_[listener.group()],
        .units = units,
    };
    if (listener.direct()) {
        bump(counters_.direct_slots);
        client.peer = listener.accepted_peer();
        client.local = listener.bound();
    }
    admit(route, std::move(client));
}

void Shard::admit(ShardRoute& route, WaitingClient client) {
    if (route.waiting.empty()) {
        SharedLimit::Taken taken = route.route.limit->try_take();
        if (taken != SharedLimit::Taken::No) {
            open(route, std::move(client), taken == SharedLimit::Taken::Counted);
            // The next client would wait: stop accepting now, so that it waits in the
            // backlog rather than holding an fd here.
            if (route.full())
                hold(route);
            return;
        }
    }
    // At the route's limit (on whichever shards its connections are): the client
    // waits, holding nothing but its socket, and the route's listeners stop taking
    // more (those wait in the backlog).
    route.waiting.push_back(std::move(client));
    hold(route);
    resume(route); // room given back before hold() registered this shard is seen now
}

void Shard::hold(ShardRoute& route) {
    if (!route.held && !route.retired) {
        route.held = true;
        for_listeners_of(route, [](Listener& each) { each.hold(); });
    }
    route.want_room();
}

void Shard::resume(ShardRoute& route) {
    SharedLimit& limit = *route.route.limit;
    for (;;) {
        while (!route.waiting.empty()) {
            SharedLimit::Taken taken = limit.try_take();
            if (taken == SharedLimit::Taken::No)
                break;
            WaitingClient next = std::move(route.waiting.front());
            route.waiting.pop_front();
            open(route, std::move(next), taken == SharedLimit::Taken::Counted);
        }
        bool blocked = !route.waiting.empty() || (route.held && limit.full());
        if (!blocked) {
            if (route.held) {
                route.held = false;
                for_listeners_of(route, [](Listener& each) { each.release_hold(); });
            }
            route.stop_wanting();
            // A route replaced by a reload shares its counter with the new one (same
            // name) and this shard's bit with it: keep the bit while either waits.
            for (auto* routes : {&routes_, &retired_routes_})
                for (auto& other : *routes)
                    if (other->wanting && other->route.limit == route.route.limit)
                        other->route.limit->want(route.shard);
            return;
        }
        // Registered before the attempt above: whoever gives room back from now on
        // rings this shard. Registered only now: try once more, as room given back
        // before the registration rang nobody (shared_limit.hpp).
        if (route.wanting)
            return;
        route.want_room();
    }
}

void Shard::resume_all() {
    if (stopping_)
        return;
    connections_->resume_member_waiters();
    resume_budget();
    for (auto* routes : {&routes_, &retired_routes_})
        for (auto& route : *routes)
            if (route->held || !route->waiting.empty())
                resume(*route);
}

void Shard::open(ShardRoute& route, WaitingClient client, bool counted) {
    client.route_counted = counted;
    int err = connections_->open(route, std::move(client));
    if (err == 0) {
        for (auto& each : listeners_)
            each->shortage_over();
    } else if (is_fd_shortage(err)) {
        // Every listener shares the process's fd table: all of them pause.
        for (auto& each : listeners_)
            each->pause_for_fd_shortage("upstream socket", err, connections_->active());
    }
}

ShardRoute* Shard::shard_route_of(const RouteTable& table, std::size_t index) {
    if (index >= table.routes.size())
        return nullptr;
    const Route* wanted = &table.routes[index];
    for (auto* routes : {&routes_, &retired_routes_})
        for (auto& route : *routes)
            if (&route->route == wanted)
                return route.get();
    return nullptr;
}

// A connection of `route` has gone (its unit of the limit given back): let waiting
// clients in, then the listeners.
void Shard::on_room(ShardRoute& route) {
    if (stopping_)
        return;
    // The route replaced by a reload, or the one replacing it, shares the counter: the
    // room is theirs too (the doorbells ring only the other shards).
    for (auto* routes : {&routes_, &retired_routes_})
        for (auto& each : *routes)
            if (each->route.limit == route.route.limit && (each->held || !each->waiting.empty()))
                resume(*each);
}

} // namespace uringfwd::engine
