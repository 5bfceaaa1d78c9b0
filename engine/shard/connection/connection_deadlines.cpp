#include "shard/connection/connection_deadlines.hpp"

#include <algorithm>

namespace uringfwd::engine {

bool past_max_duration(const Connection& conn, std::chrono::steady_clock::time_point now) {
    const auto limit = conn.route->route.max_duration;
    return conn.phase == Phase::Forwarding && limit.count() > 0 &&
           now - conn.record.opened_at >= limit;
}

std::chrono::milliseconds
with_max_duration_sweep(std::chrono::milliseconds current,
                        const std::vector<std::unique_ptr<ShardRoute>>& routes) {
    for (const auto& route : routes) {
        const auto limit = route->route.max_duration;
        if (limit.count() <= 0)
            continue;
        // A tenth of a short limit, never coarser than kMaxDurationSweep: a 1 s limit
        // is closed within 100 ms of its deadline, an hour within 250 ms. An idle
        // timeout's quarter (plan_idle_sweep) may already be finer.
        auto every = std::clamp(limit / 10, std::chrono::milliseconds{10}, kMaxDurationSweep);
        current = current.count() == 0 ? every : std::min(current, every);
    }
    return current;
}

} // namespace uringfwd::engine
