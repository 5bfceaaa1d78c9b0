// The client's addresses, as a PROXY header reported them or as the sockets tell, for
// the observer, the selector, the Maglev hash and a PROXY header sent upstream.
#pragma once

#include "net/socket_address.hpp"
#include "shard/connection/connection.hpp"

#include <optional>
#include <string>

namespace uringfwd::engine {

// The client socket's own addresses (the transport's, not a PROXY header's): known
// since the accept for a slot, asked of the kernel for a plain fd.
std::optional<SocketAddress> socket_peer_of(const Connection& conn);
SocketAddress socket_local_of(const Connection& conn);
std::string client_name(const Connection& conn); // for log lines
// The client's address that counts for the allow/deny lists, per-source limits and a
// transparent connect: the PROXY header's when one named the client (accept_proxy admits
// headers from trusted sources only), else the socket's peer.
std::optional<SocketAddress> client_address_of(const Connection& conn);
// The client's addresses (inspected or the sockets'), for the observer, selector,
// Maglev and a PROXY header; two syscalls the first time when not inspected.
void fill_addresses(Connection& conn);
// The same as Endpoints, for the observer and the selector.
void fill_endpoints(Connection& conn);

} // namespace uringfwd::engine
