// The inspect phase of a connection (inspect.hpp): read the client's preamble into a
// buffer of its own and run the route's inspectors (and the listen address's) over it
// before an upstream is chosen; then the life cycle (ConnectionLife) chooses one.
#pragma once

#include "shard/connection/connection.hpp"
#include "shard/connection/connection_life.hpp"
#include "shard/loop/shard_context.hpp"
#include "shard/shard_route.hpp"
#include "support/log_throttle.hpp"

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <utility>

namespace uringfwd::engine {

class Inspection {
public:
    // `route_at` finds the shard's state of route `index` of `table` (an inspector's
    // route choice), null when the shard has none.
    using RouteLookup = std::function<ShardRoute*(const RouteTable& table, std::size_t index)>;
    Inspection(ShardContext& shard, ConnectionLife& life, RouteLookup route_at)
        : shard_(shard), life_(life), route_at_(std::move(route_at)) {}

    // Starts the phase for a connection that holds its InspectState. Returns 0, as
    // Connections::open() does.
    int begin_inspect(Connection& conn);
    // A read of the preamble completed (Op::InspectRecv).
    void on_inspect_read(Connection& conn, int result);

private:
    void read_more(Connection& conn);
    // Asks the chain about what has been read; ends the phase when it is through.
    void run_inspectors(Connection& conn);
    void reject_inspected(Connection& conn, CloseReason reason, std::string_view who,
                          const std::string& detail);
    void move_to_route(Connection& conn, std::size_t index);
    // The inspector at the connection's stage: the route's chain, then the listener's;
    // null when the connection is through them all.
    static const Inspector* stage_of(const Connection& conn);

    ShardContext& shard_;
    ConnectionLife& life_;
    RouteLookup route_at_;
    LogThrottle inspect_reject_log_;
};

} // namespace uringfwd::engine
