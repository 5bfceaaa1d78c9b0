// Counters an Engine exposes; a snapshot, summed over shards. The fields are generated
// from the one counter list in counter_list.hpp.
#pragma once

#include "uringfwd/close_reason.hpp"
#include "uringfwd/connect_failure.hpp"
#include "uringfwd/counter_list.hpp"
#include "uringfwd/histogram.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace uringfwd {

enum class CounterKind : uint8_t { Counter, Gauge };

struct CounterInfo {
    const char* name; // as in the struct: "bytes_to_upstream"
    CounterKind kind;
    const char* help; // one line
};

struct EngineStats {
#define URINGFWD_STATS_FIELD(name, kind, help) uint64_t name = 0;
    URINGFWD_COUNTERS(URINGFWD_STATS_FIELD)
#undef URINGFWD_STATS_FIELD

    // Calls f(const CounterInfo&, uint64_t value) for every counter, in list order.
    template <typename F> void for_each(F&& f) const {
#define URINGFWD_STATS_VISIT(name, kind, help) f(CounterInfo{#name, CounterKind::kind, help}, name);
        URINGFWD_COUNTERS(URINGFWD_STATS_VISIT)
#undef URINGFWD_STATS_VISIT
    }

    // The closed_<reason> counter of a reason.
    uint64_t closed(CloseReason reason) const;

    EngineStats& operator+=(const EngineStats& other);

    // "accepted=… active=… …": every counter and cqes_per_enter, one line for logs and
    // SIGUSR1 reports.
    std::string to_line() const;

    double completions_per_enter() const {
        return enters == 0 ? 0.0 : static_cast<double>(completions) / static_cast<double>(enters);
    }
};

struct ShardStats {
    int shard = 0;
    int cpu = -1;  // the CPU the shard is pinned to
    int node = -1; // its NUMA node, -1 if unknown
    EngineStats counters;
    // Accept to upstream connected, for each connection that got connected, and accept
    // to close, for every connection; counted as each connection closes.
    HistogramSnapshot connect_time;
    HistogramSnapshot duration;
};

// One pool member, summed over shards (Engine::route_stats).
struct MemberStats {
    std::string name;      // its address as configured
    bool up = true;        // no shard has it marked down (passive or active health)
    uint64_t active = 0;   // connections to it now, connecting included
    uint64_t connects = 0; // connects that succeeded
    uint64_t failures = 0; // connects refused, unreachable or timed out
    // failures, by why, indexed by ConnectFailure.
    std::array<uint64_t, kConnectFailureCount> connect_failures{};
    // Bytes of the connections to it, counted as each one closes.
    uint64_t bytes_to_upstream = 0;
    uint64_t bytes_to_client = 0;
};

// One route, summed over shards. Counts start when the route is configured. After a
// reconfigure() the connections still open on the route as it was count here, by the
// route's name (and a removed route or member keeps its entry), until the last of them
// has closed: then its counts are gone, and the route's start again from what the new
// configuration counted (a counter reset, to Prometheus).
struct RouteStats {
    std::string name;
    uint64_t accepted = 0; // clients accepted or handed over
    uint64_t active = 0;   // open now
    // Clients waiting at the route's limit: accepted while it was full, and those in
    // the accept queue of its TCP listeners (a Unix socket's queue cannot be read).
    uint64_t waiting = 0;
    // Connections closed per reason, indexed by CloseReason.
    std::array<uint64_t, kCloseReasonCount> closed{};
    // Bytes of its connections (to any upstream), counted as each one closes.
    uint64_t bytes_to_upstream = 0;
    uint64_t bytes_to_client = 0;
    std::vector<MemberStats> members; // in the pool's order

    uint64_t closed_for(CloseReason reason) const {
        return closed[static_cast<std::size_t>(reason)];
    }
};

// The engine's per-source table (EngineConfig::access.source_table_size), all routes
// together; zeros while no route has per-source limits. Engine::source_table_stats().
struct SourceTableStats {
    uint64_t capacity = 0;  // entries: the bound
    uint64_t tracked = 0;   // sources counted now (entries with connections open or a
                            // token bucket not yet full again)
    uint64_t evictions = 0; // idle sources forgotten to make room for new ones
    uint64_t untracked = 0; // clients let in uncounted: their bucket held only sources
                            // with connections open
};

} // namespace uringfwd
