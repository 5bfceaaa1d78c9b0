// The life cycle of a shard's connections: open the upstream socket for an accepted
// client, connect it (with a timeout), start both directions, and close the pair once
// both directions finished or one of them failed, with a reason that is counted.
#pragma once

#include "net/socket_address.hpp"
#include "shard/connection.hpp"
#include "shard/directions.hpp"
#include "shard/shard_context.hpp"
#include "support/log_throttle.hpp"

namespace uringfwd::engine {

class Connections {
public:
    explicit Connections(ShardContext& shard) : shard_(shard), directions_(shard) {}

    // A client was accepted: connect it to `upstream`, which must outlive the
    // connection. Returns 0, or the errno when no socket could be had for the
    // upstream; the client is then reset, and for a shortage of fds the caller pauses
    // accepting.
    int open(int client_fd, bool client_is_tcp, const SocketAddress& upstream);

    // A completion of one of a connection's operations (slot != kShardSlot).
    void on_completion(const OpTag& tag, const uring::Completion& c);

    // After every batch of completions (see Directions::resume_waiters).
    void after_batch();

    // Closes every connection with RST, for `reason` (DrainTimeout or Stopped).
    void close_all(CloseReason reason);

    std::size_t active() const { return table_.active(); }
    Directions& directions() { return directions_; }

private:
    void on_connected(Connection& conn, int result);
    void handle(Connection& conn, Side side, const Outcome& outcome);
    // Starts closing: cancels what is in flight; the slot is freed once nothing is.
    // A second call keeps the first reason.
    void close(Connection& conn, CloseReason reason);
    void settle(Connection& conn);
    void finalize(Connection& conn);

    ShardContext& shard_;
    Directions directions_;
    ConnectionTable table_;
    LogThrottle upstream_failure_log_;
};

} // namespace uringfwd::engine
