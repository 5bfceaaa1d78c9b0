// Moves between shards (Engine::move_connection, rebalance; docs/handover.md "Between
// shards"): the connection goes quiet and is detached here exactly as an upgrade's
// hand-over detaches one (connection_handover.cpp), and the shard it moves to adopts
// it as it would one from another process, keeping its id and what its observer knows.
#include "shard/shard.hpp"

namespace uringfwd::engine {

Connections::CurrentRoute Shard::current_route() const {
    return [this](const ShardRoute& route) {
        for (const auto& each : routes_)
            if (each.get() == &route)
                return true;
        return false;
    };
}

std::optional<std::string> Shard::request_move(uint64_t id, int to,
                                               std::chrono::milliseconds limit) {
    return connections_->request_move(id, to, limit, current_route());
}

std::size_t Shard::request_moves(std::size_t count, int to) {
    if (stopping_ || to == setup_.index)
        return 0;
    return connections_->request_moves(count, to, current_route());
}

void Shard::take_moved(Handoff& handoff, ShardRoute* route) {
    Resumed::SameEngine& same = *handoff.resumed->moved;
    // The unit of the route's limit it held stays counted when this shard's route
    // shares the limit (the same table, or a reload's successor of it); else it goes
    // back, and the connection comes in uncounted as one carried on from elsewhere.
    const bool counted = same.route_limit && route && route->route.limit == same.route_limit;
    if (same.route_limit && !counted)
        setup_.doorbells->give_back(*same.route_limit, static_cast<std::size_t>(setup_.index));
    if (route == nullptr) {
        if (same.sources)
            same.sources->release(same.source_hold);
        log_.warn("connection {}: moved here for route \"{}\", which a reload removed "
                  "meanwhile; resetting it",
                  same.id, handoff.route);
        return;
    }
    const SocketUnits units = take_handoff_units(handoff);
    const bool while_stopping = stopping_;
    open(*route,
         WaitingClient{.client = std::move(handoff.client),
                       .upstream = std::move(handoff.upstream),
                       .units = units,
                       .resumed = std::move(handoff.resumed)},
         counted);
    if (while_stopping)
        keep_drain_deadline();
}

void Shard::send_moved(DetachedConnection&& conn, Resumed::SameEngine&& same, int to) {
    Handoff handoff{
        .client = UnservedSocket::plain(conn.client_fd()),
        .upstream = UnservedSocket::plain(conn.upstream_fd()),
        .route = conn.route,
        .resumed = resumed_from(conn),
    };
    handoff.resumed->moved = std::move(same);
    conn.release_fds(); // the hand-off's now
    if (setup_.move_to && setup_.move_to(to, handoff))
        return;
    // The shard it was to go to has ended (the engine stops): it comes back here, and
    // is served (or drained) with the rest.
    log_.debug("connection {}: shard {} has ended; it stays", handoff.resumed->moved->id, to);
    if (!hand_over(handoff))
        log_.warn("connection {}: no shard to carry it on; resetting it",
                  handoff.resumed->moved->id);
}

} // namespace uringfwd::engine
