// A shard's state for one route: its pool (balancing, passive health, per-member
// counts), its open connections, and the clients accepted while the route was at its
// limit, which wait here for room. Each shard has its own; the shards share the
// read-only Route and, on the admission path only, the counters of its limits
// (SharedLimit: max_connections is one number for the whole engine).
#pragma once

#include "routing/pool_state.hpp"
#include "routing/route_table.hpp"
#include "shard/handover/resumed.hpp"
#include "shard/inspect/inspect.hpp"
#include "shard/socket_units.hpp"
#include "shard/unserved_socket.hpp"
#include "uringfwd/stats.hpp"

#include <array>
#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

namespace uringfwd::engine {

// A client let in to a route, or waiting for room at its limit; built with designated
// initializers where it comes from (a listener, a hand-over). It owns its sockets
// (UnservedSocket): one dropped before it is let in, with its route or at the shard's
// stop, is reset and closed (a slot through the ring), never leaked.
struct WaitingClient {
    UnservedSocket client{};           // a plain fd, or a slot of the file table
    bool set_no_delay = false;         // TCP_NODELAY still to be set (a TCP listener's client)
    std::vector<std::byte> preamble{}; // handed-over clients (Engine::forward)
    UnservedSocket upstream{};         // Engine::forward_pair: connected by the application
    // Accepted by a listener: goes through the route's inspectors. Handed-over
    // connections do not (the application has read from them already).
    bool inspect = false;
    // The inspector of the listen address it came to, when routes share it (the
    // ClientHello's: sni_inspector.hpp); runs after the route's own chain.
    std::shared_ptr<const Inspector> listener_inspector = nullptr;
    // Accepted into a slot (client.fixed()): the socket's addresses came with the
    // accept (the local one is the listener's); a slot has no fd to ask.
    SocketAddress peer{};
    SocketAddress local{};
    SocketUnits units{}; // of the shard's socket budget, held from its accept on
    // Holds a unit of the route's limit (SharedLimit::Taken::Counted), given back when
    // its connection closes; set when it is let in.
    bool route_counted = false;
    // Adopted from another engine (an upgrade's hand-over) with its upstream: what it
    // had done there.
    std::optional<Resumed> resumed = std::nullopt;
};

struct ShardRoute {
    // `table` holds `route` and is kept alive as long as this state is.
    // `shard`: the index of the shard it belongs to.
    ShardRoute(const Route& route, std::shared_ptr<const RouteTable> table, std::size_t shard);
    ~ShardRoute() {
        stop_wanting();
        stop_wanting_member_room();
    }
    ShardRoute(const ShardRoute&) = delete;
    ShardRoute& operator=(const ShardRoute&) = delete;

    std::shared_ptr<const RouteTable> table;
    const Route& route;
    std::size_t shard;
    PoolState pool;
    std::size_t active = 0;            // on this shard
    std::deque<WaitingClient> waiting; // accepted at the limit; owns their sockets
    bool held = false;                 // its listeners hold off accepting
    bool wanting = false;              // registered at route.limit (SharedLimit::want)
    bool retired = false;              // replaced by a reload: it has no listeners
    // Connections of this shard waiting for a member with room (every member they may
    // go to is at its max_connections), and whether the shard is registered at the
    // members' limits for them.
    std::size_t member_waiting = 0;
    bool wanting_members = false;
    InspectorChain inspectors; // empty: clients go straight to an upstream

    // Counted by the shard alone; read through Shard::route_stats() on its thread.
    uint64_t accepted = 0;
    std::array<uint64_t, kCloseReasonCount> closed{};
    std::vector<uint64_t> connects; // per member: connects that succeeded
    std::vector<uint64_t> failures; // per member: connects that failed
    // Per member, and one more for the selector's addresses: whose turn it is among the
    // source addresses (RouteConfig::source), round-robin.
    std::vector<uint64_t> source_turns;
    // per member: failures by ConnectFailure
    std::vector<std::array<uint64_t, kConnectFailureCount>> failures_by;
    // Bytes of closed connections: of the route, and per member (the member the
    // connection was forwarded to).
    uint64_t bytes_to_upstream = 0;
    uint64_t bytes_to_client = 0;
    std::vector<uint64_t> member_bytes_to_upstream;
    std::vector<uint64_t> member_bytes_to_client;

    // The route has no room for another connection, on any shard.
    bool full() const { return route.limit->full(); }
    // Waits for room at the route's limit: a shard that gives room back rings this one.
    void want_room() {
        if (!wanting)
            route.limit->want(shard);
        wanting = true;
    }
    void stop_wanting() {
        if (wanting)
            route.limit->unwant(shard);
        wanting = false;
    }
    // The same at every member's limit, for connections waiting for a member.
    void want_member_room();
    void stop_wanting_member_room();
    // Takes the health checker's latest verdicts into the pool (when it has checks); a
    // member that came up starts its slow start at `now`.
    void refresh_health(std::chrono::steady_clock::time_point now);
    // After a reload: the slow starts `old` (this route's state before it, on this
    // shard) has under way go on for the members of the same name.
    void keep_ramps_of(const ShardRoute& old);
    // All connect attempts of one client together end by then.
    std::chrono::milliseconds connect_deadline() const;
    bool hashes_client() const { return route.pool.balance == BalancePolicy::Maglev; }
};

} // namespace uringfwd::engine
