#include "shard/connection/source_gate.hpp"

#include "shard/inspect/client_addresses.hpp"
#include "shard/shard_route.hpp"

namespace uringfwd::engine {

namespace {

std::string address_text(const std::optional<SocketAddress>& address) {
    if (!address)
        return "?";
    if (address->family() == AF_UNIX)
        return "unix peer";
    return to_endpoint(*address).to_string();
}

} // namespace

std::optional<CloseReason> SourceGate::admit(Connection& conn) {
    const Route& route = conn.route->route;
    const bool limited = route.source_rule.active();
    if (route.access.empty() && !limited)
        return std::nullopt; // the usual route: nothing asked of the kernel or the table
    const std::optional<SocketAddress> peer = client_address_of(conn);
    // A peer that cannot be read (the socket already gone) names no address an allow
    // list lets in; with a deny list alone it goes on and fails where it would have.
    const sockaddr_storage none{};
    if (!route.access.admits(peer ? peer->storage : none)) {
        if (denied_log_.allow(LogThrottle::Clock::now()))
            shard_.log.info("route \"{}\": client {} is denied by its allow/deny lists; "
                            "resetting it{}",
                            route.name, address_text(peer),
                            suppressed_note(denied_log_.suppressed()));
        return CloseReason::Denied;
    }
    if (!limited || !peer)
        return std::nullopt;
    const std::optional<SourceKey> key =
        source_key(route.source_route, peer->storage, route.source_rule);
    if (!key)
        return std::nullopt; // a Unix peer: no source to count
    SourceTable& table = *conn.route->table->sources;
    SourceTable::Result result = table.admit(*key, route.source_rule, shard_.now);
    switch (result.verdict) {
    case SourceTable::Verdict::Admitted:
        conn.source_hold = result.hold;
        return std::nullopt;
    case SourceTable::Verdict::Untracked: // counted by the table: the metrics say so
        return std::nullopt;
    case SourceTable::Verdict::OverOpen:
    case SourceTable::Verdict::OverRate:
        break;
    }
    if (limit_log_.allow(LogThrottle::Clock::now())) {
        const bool open = result.verdict == SourceTable::Verdict::OverOpen;
        shard_.log.info("route \"{}\": client {} is over {} ({}{}); resetting it{}", route.name,
                        address_text(peer),
                        open ? "max_connections_per_source" : "connection_rate_per_source",
                        open ? route.source_rule.max_open : route.source_rule.rate,
                        open ? " open" : "/s", suppressed_note(limit_log_.suppressed()));
    }
    return CloseReason::SourceLimit;
}

void SourceGate::release(Connection& conn) {
    if (conn.source_hold.held())
        conn.route->table->sources->release(conn.source_hold);
}

} // namespace uringfwd::engine
