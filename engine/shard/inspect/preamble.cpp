// What the upstream receives before the client's stream: a PROXY header of the
// engine's (send_proxy, protocol/proxy_header.hpp) and the bytes read from the client
// before (Engine::forward's already_read, or what the inspect phase read past its
// preamble). They go out as one buffer before either direction starts reading the
// client, so a header precedes every client byte on the splice and copy paths alike.
#include "protocol/proxy_header.hpp"
#include "shard/connection/connections.hpp"
#include "shard/inspect/client_addresses.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

namespace uringfwd::engine {

void Connections::add_proxy_header(Connection& conn) {
    if (conn.caller_upstream)
        return; // Engine::forward_pair: the application's own connection (route.hpp)
    const Route& route = conn.route->route;
    ProxyVersion version =
        conn.attempt.member >= 0
            ? route.members[static_cast<std::size_t>(conn.attempt.member)].send_proxy
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

void Connections::send_preamble(Connection& conn) {
    shard_.io.send(conn.in_flight, conn.tag(Op::Preamble), conn.upstream.ref(),
                   conn.preamble.data() + conn.preamble_sent,
                   conn.preamble.size() - conn.preamble_sent, MSG_NOSIGNAL);
}

void Connections::on_preamble_sent(Connection& conn, int result) {
    if (result > 0) {
        // Counted even when closing: what was sent is delivered, and what was not makes
        // the close a reset (Directions::leaves_bytes_behind). Only the client's bytes
        // count as forwarded, not a PROXY header of the engine's.
        std::size_t own_left =
            conn.preamble_own > conn.preamble_sent ? conn.preamble_own - conn.preamble_sent : 0;
        auto clients = static_cast<uint64_t>(static_cast<std::size_t>(result) -
                                             std::min(own_left, static_cast<std::size_t>(result)));
        conn.preamble_sent += static_cast<std::size_t>(result);
        conn.bytes[static_cast<int>(Side::ToUpstream)] += clients;
        bump(shard_.io.counters().bytes_to_upstream, clients);
    }
    if (conn.phase == Phase::Closing)
        return;
    if (result <= 0) {
        handle(conn, Side::ToUpstream,
               Outcome::failed(CloseReason::UpstreamReset, "writing", "upstream",
                               result == 0 ? -EPIPE : result));
        return;
    }
    if (conn.preamble_sent < conn.preamble.size()) {
        send_preamble(conn);
        return;
    }
    conn.preamble = {}; // its memory goes now, not with the connection
    handle(conn, Side::ToUpstream, directions_.start(conn, Side::ToUpstream));
}

} // namespace uringfwd::engine
