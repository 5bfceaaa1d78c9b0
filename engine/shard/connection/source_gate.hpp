// At the edge (issue 23): who may connect to a route (its allow/deny lists,
// routing/access_list.hpp) and how much one source may take (its per-source limits,
// counted engine-wide in routing/source_limits.hpp's table). Judged when a connection is
// about to choose its upstream: after a PROXY header has named the client (the address
// judged is then the header's), before any upstream work.
#pragma once

#include "shard/connection/connection.hpp"
#include "shard/loop/shard_context.hpp"
#include "support/log_throttle.hpp"
#include "uringfwd/close_reason.hpp"

#include <optional>

namespace uringfwd::engine {

class SourceGate {
public:
    explicit SourceGate(ShardContext& shard) : shard_(shard) {}

    // Nothing when `conn` may go on; else the reason to reset it with (Denied,
    // SourceLimit), logged (throttled). An admitted connection of a route with a
    // max_connections_per_source holds its source's entry (conn.source_hold) until
    // release().
    std::optional<CloseReason> admit(Connection& conn);
    // Gives the connection's hold back, if it has one: once, when it is finalized.
    static void release(Connection& conn);

private:
    ShardContext& shard_;
    LogThrottle denied_log_;
    LogThrottle limit_log_;
};

} // namespace uringfwd::engine
