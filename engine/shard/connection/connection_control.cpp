// Runtime control of a shard's connections (Engine::connections(), close_connection(),
// on_member_down): what each open one is doing, and resets on an operator's word.
// Runs on the shard's thread, from a task its mailbox runs.
#include "net/sockets.hpp"
#include "shard/connection/connections.hpp"
#include "shard/inspect/client_addresses.hpp"

namespace uringfwd::engine {

namespace {

std::string_view phase_name(const Connection& conn) {
    switch (conn.phase) {
    case Phase::Inspecting:
        return "inspecting";
    case Phase::Connecting:
        return conn.attempt.waiting_member ? "waiting" : "connecting";
    case Phase::Forwarding:
        return "forwarding";
    case Phase::Closing:
        return "closing";
    }
    return "?";
}

// The pool member's key, "" when none (not yet chosen, the selector's own address, an
// upstream the application connected).
std::string member_of(const Connection& conn) {
    if (conn.attempt.member < 0)
        return {};
    return conn.route->route.members[static_cast<std::size_t>(conn.attempt.member)].name;
}

} // namespace

bool Connections::matches(const Connection& conn, std::string_view route, std::string_view member) {
    if (!route.empty() && conn.route->route.name != route)
        return false;
    return member.empty() || (conn.attempt.member >= 0 && member_of(conn) == member);
}

void Connections::snapshot(std::vector<OpenConnection>& out, const ConnectionFilter& filter,
                           std::size_t limit) {
    const auto now = std::chrono::steady_clock::now();
    table_.for_each_active([&](Connection& conn) {
        if ((limit != 0 && out.size() >= limit) || !matches(conn, filter.route, filter.member))
            return;
        OpenConnection c;
        c.id = conn.record.id;
        c.route = conn.route->route.name;
        fill_endpoints(conn); // once per connection: cached in its record
        if (conn.client_sa.length > 0)
            c.client = conn.record.client_address.to_string();
        c.member = member_of(conn);
        // A pair handed over connected: its fd's peer, or (moved into slots) the one
        // read before the move.
        if (conn.attempt.member >= 0 || conn.attempt.has_chosen || conn.caller_upstream)
            c.upstream = upstream_text(conn);
        c.shard = static_cast<unsigned>(shard_.shard_index);
        c.age = std::chrono::duration_cast<std::chrono::milliseconds>(now - conn.record.opened_at);
        c.bytes_to_upstream = conn.bytes[static_cast<int>(Side::ToUpstream)];
        c.bytes_to_client = conn.bytes[static_cast<int>(Side::ToClient)];
        c.phase = phase_name(conn);
        out.push_back(std::move(c));
    });
}

std::string Connections::upstream_text(const Connection& conn) const {
    return upstream_endpoint(conn).to_string();
}

bool Connections::close_by_id(uint64_t id, CloseReason reason) {
    bool found = false;
    table_.for_each_active([&](Connection& conn) {
        if (found || conn.record.id != id || conn.phase == Phase::Closing)
            return;
        found = true;
        close(conn, reason);
    });
    return found;
}

std::size_t Connections::close_where(std::string_view route, std::string_view member,
                                     CloseReason reason) {
    std::size_t closed = 0;
    table_.for_each_active([&](Connection& conn) {
        if (conn.phase == Phase::Closing || !matches(conn, route, member))
            return;
        ++closed;
        close(conn, reason);
    });
    return closed;
}

std::size_t Connections::close_forwarding_to(const ShardRoute& route,
                                             const std::function<bool(std::size_t)>& member,
                                             CloseReason reason) {
    std::size_t closed = 0;
    table_.for_each_active([&](Connection& conn) {
        // Forwarding only: one still connecting fails over as any connect to a member
        // that is gone would.
        if (conn.route != &route || conn.phase != Phase::Forwarding || conn.attempt.member < 0 ||
            !member(static_cast<std::size_t>(conn.attempt.member)))
            return;
        ++closed;
        close(conn, reason);
    });
    return closed;
}

} // namespace uringfwd::engine
