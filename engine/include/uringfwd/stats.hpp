// Counters an Engine exposes; a snapshot, summed over shards. The fields are generated
// from the one counter list in counter_list.hpp.
#pragma once

#include "uringfwd/close_reason.hpp"
#include "uringfwd/counter_list.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
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
};

// One pool member, summed over shards (Engine::route_stats).
struct MemberStats {
    std::string name;      // its address as configured
    bool up = true;        // no shard has it marked down (passive or active health)
    uint64_t active = 0;   // connections to it now, connecting included
    uint64_t connects = 0; // connects that succeeded
    uint64_t failures = 0; // connects refused, unreachable or timed out
};

// One route, summed over shards. Counts start when the route is configured: a
// reconfigure() starts them again (connections still open on the route as it was are
// then no longer counted here).
struct RouteStats {
    std::string name;
    uint64_t accepted = 0; // clients accepted or handed over
    uint64_t active = 0;   // open now
    uint64_t waiting = 0;  // accepted while the route was at its limit, not yet let in
    // Connections closed per reason, indexed by CloseReason.
    std::array<uint64_t, kCloseReasonCount> closed{};
    std::vector<MemberStats> members; // in the pool's order

    uint64_t closed_for(CloseReason reason) const {
        return closed[static_cast<std::size_t>(reason)];
    }
};

} // namespace uringfwd
