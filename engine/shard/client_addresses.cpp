// The client's addresses, as a PROXY header reported them or as the sockets tell, and
// send_proxy: a PROXY header (protocol/proxy_header.hpp) put before everything else the
// upstream receives, so it goes out ahead of any client byte on the splice and copy
// paths alike: it travels as the first bytes of the connection's preamble, which is
// sent before either direction starts reading the client.
#include "net/sockets.hpp"
#include "protocol/proxy_header.hpp"
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

void Connections::add_proxy_header(Connection& conn) {
    if (conn.caller_upstream)
        return; // Engine::forward_pair: the application's own connection (route.hpp)
    const Route& route = conn.route->route;
    ProxyVersion version = conn.member >= 0
                               ? route.members[static_cast<std::size_t>(conn.member)].send_proxy
                               : route.send_proxy;
    if (version == ProxyVersion::Off)
        return;
    // The client as a PROXY header reported it, or as the socket tells (two syscalls,
    // paid only by routes that send a header). A Unix client has no address to tell:
    // v1 UNKNOWN, v2 LOCAL.
    fill_addresses(conn);
    const SocketAddress* source = conn.client_sa.length > 0 ? &conn.client_sa : nullptr;
    const SocketAddress* destination = conn.local_sa.length > 0 ? &conn.local_sa : nullptr;
    std::vector<std::byte> header;
    header.reserve(version == ProxyVersion::V1 ? proxy::kV1MaxLength : 52 + conn.proxy_tlvs.size());
    if (version == ProxyVersion::V1)
        proxy::write_v1(header, source, destination);
    else
        proxy::write_v2(header, source, destination, conn.proxy_tlvs);
    conn.preamble_own = header.size();
    conn.preamble.insert(conn.preamble.begin(), header.begin(), header.end());
    conn.preamble_sent = 0;
}

} // namespace uringfwd::engine
