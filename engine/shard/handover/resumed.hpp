// What a connection adopted from another engine (Engine::adopt: an upgrade's
// connection hand-over, docs/handover.md) brings along from there.
#pragma once

#include "net/socket_address.hpp"
#include "pipes/pipe.hpp"
#include "routing/shared_limit.hpp"
#include "routing/source_limits.hpp"
#include "uringfwd/endpoint.hpp"
#include "uringfwd/handover.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace uringfwd::engine {

struct Resumed {
    std::string member;         // its pool member's name there; empty: none
    uint64_t bytes[2] = {0, 0}; // forwarded there, per Side
    std::chrono::steady_clock::time_point opened_at;
    std::chrono::steady_clock::time_point connected_at;
    // Per Side: bytes read there and not yet delivered, in the pipe they wait in; the
    // direction delivers them before it reads its source again.
    std::optional<pipes::Pipe> unsent[2]{};
    // A move between two shards of one engine (Engine::move_connection) keeps what the
    // application knows of the connection: its id, the observer's on_open already
    // called (on_close follows once, at its real end), the client's addresses (a
    // PROXY header's, when one told them). None for an upgrade's hand-over: a new
    // process gives new ids.
    struct SameEngine {
        uint64_t id = 0;
        bool observed = false;
        bool endpoints_filled = false;
        Endpoint client_address;
        Endpoint local_address;
        Endpoint upstream_address;
        bool has_addresses = false;
        SocketAddress client_sa;
        SocketAddress local_sa;
        // What it holds of engine-wide limits goes with it (it was open all along): a
        // unit of its route's connection limit (null: none), and its entry of the
        // per-source table `sources` (max_connections_per_source).
        std::shared_ptr<SharedLimit> route_limit;
        std::shared_ptr<SourceTable> sources;
        SourceTable::Hold source_hold{};
    };
    std::optional<SameEngine> moved{};
};

// What `conn` brings along: its names, counts and times, and its pipes, which the
// Resumed owns from here on (the sockets stay with `conn`).
Resumed resumed_from(DetachedConnection& conn);

} // namespace uringfwd::engine
