// A connection's sockets in slots of the shard's registered file table (direct
// descriptors, docs/kernel.md §11): what both the life cycle (Connections) and the
// upstream attempt (UpstreamConnector) do to one socket.
#pragma once

#include "shard/connection/connection.hpp"
#include "shard/loop/shard_io.hpp"

namespace uringfwd::engine {

// Sets TCP_NODELAY on a socket: a syscall for a plain fd, through the ring for a slot.
void no_delay(ShardIo& io, Connection& conn, const ConnSocket& socket);
// One slot: its close submitted (with SO_LINGER {1, 0} first when `reset`), counted out
// of the table's gauge.
void close_slot(ShardIo& io, Connection& conn, ConnSocket& socket, bool reset);

} // namespace uringfwd::engine
