// The client's addresses, as a PROXY header reported them or as the sockets tell, for
// the observer, the selector, the Maglev hash and a PROXY header sent upstream.
#include "net/sockets.hpp"
#include "shard/connection/connections.hpp"

namespace uringfwd::engine {

std::optional<SocketAddress> Connections::socket_peer_of(const Connection& conn) const {
    if (conn.socket_addresses_known)
        return conn.socket_peer;
    return conn.client.fixed() ? std::nullopt : peer_address(conn.client.fd());
}

SocketAddress Connections::socket_local_of(const Connection& conn) const {
    if (conn.socket_addresses_known)
        return conn.socket_local;
    return conn.client.fixed() ? SocketAddress{} : local_address(conn.client.fd());
}

std::string Connections::client_name(const Connection& conn) const {
    if (conn.socket_addresses_known) {
        if (conn.socket_peer.family() == AF_UNIX)
            return "unix peer";
        return to_endpoint(conn.socket_peer).to_string();
    }
    return conn.client.fixed() ? std::string("?") : peer_name(conn.client.fd());
}

void Connections::fill_addresses(Connection& conn) {
    if (conn.has_addresses)
        return;
    if (std::optional<SocketAddress> peer = socket_peer_of(conn))
        conn.client_sa = *peer;
    conn.local_sa = socket_local_of(conn);
    conn.has_addresses = true;
}

void Connections::fill_endpoints(Connection& conn) {
    if (conn.record.endpoints_filled)
        return;
    // Two syscalls per connection (none after a PROXY header), paid only by those who
    // look: an observer or a selector.
    fill_addresses(conn);
    conn.record.client_address =
        conn.client_sa.length > 0 ? to_endpoint(conn.client_sa) : Endpoint{};
    conn.record.local_address = conn.local_sa.length > 0 ? to_endpoint(conn.local_sa) : Endpoint{};
    conn.record.endpoints_filled = true;
}

void Connections::notify_open(Connection& conn) {
    if (shard_.config.observer && !conn.record.observed) {
        fill_endpoints(conn);
        conn.record.observed = true;
        shard_.config.observer->on_open(info_of(conn));
    }
}

} // namespace uringfwd::engine
