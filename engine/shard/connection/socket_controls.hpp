// Socket controls (RouteConfig: keepalive, user timeout, mark, tos) set on one of a
// connection's sockets, by the life cycle on the client's after its accept and by the
// upstream attempt on the upstream's before its connect. The lists come made from the
// route (net/socket_controls.hpp); this only applies them.
#pragma once

#include "net/socket_controls.hpp"
#include "shard/connection/connection.hpp"
#include "shard/loop/shard_io.hpp"

#include <vector>

namespace uringfwd::engine {

// The first option a plain fd refused, and why; none when `option` is null.
struct OptionFailure {
    const SocketOption* option = nullptr;
    int error = 0;
};

// Sets each of `options` on `socket`: setsockopt(2) on a plain fd (all of them, a
// failure does not stop the others), through the ring on a slot, tagged
// Op::SocketControl with `side` (ToUpstream: the client's socket), where a failure
// comes back as the completion's result. Submitted before anything else on the socket
// and run inline at submission (as no_delay(), direct_sockets.cpp), so they are in
// force before its first byte or SYN. The options live in the route, which outlives
// the connection: the ring reads each value late.
OptionFailure set_options(ShardIo& io, Connection& conn, const ConnSocket& socket, Side side,
                          const std::vector<SocketOption>& options);

} // namespace uringfwd::engine
