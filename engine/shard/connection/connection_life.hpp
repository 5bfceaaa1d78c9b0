// What the owners of a connection's phases (UpstreamConnector, Inspection) may ask of
// its life cycle, which Connections keeps: the few steps between phases and the end.
// Narrow on purpose: an owner reaches no other part of the table or the directions.
#pragma once

#include "shard/connection/connection.hpp"
#include "shard/shard_route.hpp"
#include "shard/socket_units.hpp"
#include "uringfwd/close_reason.hpp"

namespace uringfwd::engine {

class ConnectionLife {
public:
    // Starts closing: cancels what is in flight; the slot is freed once nothing is.
    // A second call keeps the first reason.
    virtual void close(Connection& conn, CloseReason reason) = 0;
    // Frees a closing connection once nothing of it is in flight.
    virtual void settle(Connection& conn) = 0;
    // After accept (and inspection): the selector or the pool chooses; connect.
    // Returns 0, or the errno when no socket could be had for the upstream.
    virtual int choose_upstream(Connection& conn) = 0;
    // The upstream is connected: the preamble, then both directions.
    virtual void start_forwarding(Connection& conn) = 0;
    // The connection left `route` for another (an inspector's choice): its room there.
    virtual void left_route(ShardRoute& route) = 0;
    // No slot of the registered file table was to be had for `what`: counted, logged.
    virtual void table_full(const char* what) = 0;
    // A socket control (socket_controls.hpp) the socket of `side` (ToUpstream: the
    // client's) refused with `error`: logged, throttled; the connection goes on.
    virtual void socket_control_failed(Connection& conn, Side side, std::string_view what,
                                       int error) = 0;

protected:
    ~ConnectionLife() = default;
};

} // namespace uringfwd::engine
