// The client's addresses (client_addresses.hpp).
#include "shard/inspect/client_addresses.hpp"

#include "net/sockets.hpp"

namespace uringfwd::engine {

std::optional<SocketAddress> socket_peer_of(const Connection& conn) {
    if (conn.socket_addresses_known)
        return conn.socket_peer;
    return conn.client.fixed() ? std::nullopt : peer_address(conn.client.fd());
}

SocketAddress socket_local_of(const Connection& conn) {
    if (conn.socket_addresses_known)
        return conn.socket_local;
    return conn.client.fixed() ? SocketAddress{} : local_address(conn.client.fd());
}

std::string client_name(const Connection& conn) {
    if (conn.socket_addresses_known) {
        if (conn.socket_peer.family() == AF_UNIX)
            return "unix peer";
        return to_endpoint(conn.socket_peer).to_string();
    }
    return conn.client.fixed() ? std::string("?") : peer_name(conn.client.fd());
}

std::optional<SocketAddress> client_address_of(const Connection& conn) {
    if (conn.has_addresses && conn.client_sa.length > 0)
        return conn.client_sa;
    return socket_peer_of(conn);
}

void fill_addresses(Connection& conn) {
    if (conn.has_addresses)
        return;
    if (std::optional<SocketAddress> peer = socket_peer_of(conn))
        conn.client_sa = *peer;
    conn.local_sa = socket_local_of(conn);
    conn.has_addresses = true;
}

void fill_endpoints(Connection& conn) {
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

} // namespace uringfwd::engine
