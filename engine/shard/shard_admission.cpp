// Letting clients in: a listener's new client, or one handed over, is opened on its
// route at once, or waits while the route is at its connection limit (its listeners
// then hold off accepting); a connection that goes makes room for the next.
#include "shard/shard.hpp"

namespace uringfwd::engine {

void Shard::open_connection(Listener& listener, int client_fd) {
    ShardRoute& route = *routes_[listener.route()];
    if (listener.direct()) {
        bump(counters_.direct_slots);
        admit(route, {-1,
                      listener.clients_need_no_delay(),
                      {},
                      -1,
                      /*inspect=*/true,
                      group_inspectors_[listener.group()],
                      client_fd,
                      listener.accepted_peer(),
                      listener.bound()});
        return;
    }
    admit(route, {client_fd,
                  listener.clients_need_no_delay(),
                  {},
                  -1,
                  /*inspect=*/true,
                  group_inspectors_[listener.group()]});
}

void Shard::admit(ShardRoute& route, WaitingClient client) {
    if (route.full() || !route.waiting.empty()) {
        // At the route's limit: the client waits, holding nothing but its socket, and
        // the route's listeners stop taking more (those wait in the backlog).
        route.waiting.push_back(std::move(client));
    } else {
        open(route, std::move(client));
    }
    if (route.full() && !route.held) {
        route.held = true;
        for_listeners_of(route, [](Listener& each) { each.hold(); });
    }
}

void Shard::open(ShardRoute& route, WaitingClient client) {
    bool direct = client.slot >= 0;
    int err = connections_->open(
        direct ? uring::FileRef::direct(client.slot) : uring::FileRef::plain(client.fd),
        client.set_no_delay, route, std::move(client.preamble), client.upstream_fd, client.inspect,
        std::move(client.listener_inspector), direct ? &client.peer : nullptr,
        direct ? &client.local : nullptr);
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

// A connection of `route` has gone: let waiting clients in, then the listeners.
void Shard::on_room(ShardRoute& route) {
    if (stopping_)
        return;
    while (!route.full() && !route.waiting.empty()) {
        WaitingClient next = std::move(route.waiting.front());
        route.waiting.pop_front();
        open(route, std::move(next));
    }
    if (route.held && !route.full()) {
        route.held = false;
        for_listeners_of(route, [](Listener& each) { each.release_hold(); });
    }
}

} // namespace uringfwd::engine
