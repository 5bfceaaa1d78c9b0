// The life cycle of a shard's connections: choose a member of the route's pool for an
// accepted client, connect to it (with a timeout, and on failure to the next member,
// within the route's connect deadline), start both directions, and close the pair once
// both directions finished, one of them failed or the route's idle timeout passed,
// with a reason that is counted.
#pragma once

#include "shard/connection.hpp"
#include "shard/directions.hpp"
#include "shard/shard_context.hpp"
#include "shard/shard_route.hpp"
#include "support/log_throttle.hpp"

#include <functional>
#include <vector>

namespace uringfwd::engine {

class Connections {
public:
    // `room` is called with a route whenever one of its connections has gone.
    Connections(ShardContext& shard, std::function<void(ShardRoute&)> room)
        : shard_(shard), room_(std::move(room)), directions_(shard) {}

    // A client of `route` was accepted: connect it to a member of the route's pool.
    // Returns 0, or the errno when no socket could be had for the upstream; the client
    // is then reset, and for a shortage of fds the caller pauses accepting.
    int open(int client_fd, bool client_is_tcp, ShardRoute& route);

    // A completion of one of a connection's operations (slot != kShardSlot).
    void on_completion(const OpTag& tag, const uring::Completion& c);

    // After every batch of completions (see Directions::resume_waiters).
    void after_batch();

    // Closes, with FIN, the connections of routes with an idle timeout that moved no
    // byte for that long.
    void close_idle();

    // Closes every connection with RST, for `reason` (DrainTimeout or Stopped).
    void close_all(CloseReason reason);

    std::size_t active() const { return table_.active(); }
    Directions& directions() { return directions_; }

private:
    // Chooses the next member and connects to it; closes the connection when no member
    // is left. Returns an errno as open() does.
    int connect_next(Connection& conn);
    void on_connected(Connection& conn, int result);
    void connect_failed(Connection& conn, int result);
    // Every member the connection may try has failed: log it and reset the client.
    void give_up(Connection& conn);
    std::string failure_text(const Connection& conn) const;
    void handle(Connection& conn, Side side, const Outcome& outcome);
    // Starts closing: cancels what is in flight; the slot is freed once nothing is.
    // A second call keeps the first reason.
    void close(Connection& conn, CloseReason reason);
    void settle(Connection& conn);
    void finalize(Connection& conn);
    std::string tried_names(const Connection& conn) const;

    ShardContext& shard_;
    std::function<void(ShardRoute&)> room_;
    Directions directions_;
    ConnectionTable table_;
    LogThrottle upstream_failure_log_;
};

} // namespace uringfwd::engine
