// The client's addresses, as a PROXY header reported them or as the sockets tell, for
// the observer, the selector, the Maglev hash and a PROXY header sent upstream.
#include "net/sockets.hpp"
#include "shard/connections.hpp"

namespace uringfwd::engine {

void Connections::fill_addresses(Connection& conn) {
    if (conn.has_addresses)
        return;
    if (std::optional<SocketAddress> peer = peer_address(conn.client.get()))
        conn.client_sa = *peer;
    conn.local_sa = local_address(conn.client.get());
    conn.has_addresses = true;
}

void Connections::fill_endpoints(Connection& conn) {
    if (conn.endpoints_filled)
        return;
    // Two syscalls per connection (none after a PROXY header), paid only by those who
    // look: an observer or a selector.
    fill_addresses(conn);
    conn.client_address = conn.client_sa.length > 0 ? to_endpoint(conn.client_sa) : Endpoint{};
    conn.local_address = conn.local_sa.length > 0 ? to_endpoint(conn.local_sa) : Endpoint{};
    conn.endpoints_filled = true;
}

void Connections::notify_open(Connection& conn) {
    if (shard_.config.observer && !conn.observed) {
        fill_endpoints(conn);
        conn.observed = true;
        shard_.config.observer->on_open(info_of(conn));
    }
}

} // namespace uringfwd::engine
