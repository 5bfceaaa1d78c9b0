// A route's max_duration (RouteConfig::max_duration): when a connection has been open
// too long, and how often the shard's idle sweep must run to close it on time.
#pragma once

#include "shard/connection/connection.hpp"
#include "shard/shard_route.hpp"

#include <chrono>
#include <memory>
#include <vector>

namespace uringfwd::engine {

// The sweep never runs less often than this while a route has a max_duration: the
// close comes at most this late (README, "max_duration").
inline constexpr std::chrono::milliseconds kMaxDurationSweep{250};

// Whether `conn` is forwarding and was accepted at least its route's max_duration ago.
// Connections still inspecting or connecting have deadlines of their own
// (inspect_timeout, connect_deadline) and are left to them.
bool past_max_duration(const Connection& conn, std::chrono::steady_clock::time_point now);

// The idle sweep interval `current` (0: none planned) made short enough for the
// max_duration of every route in `routes`.
std::chrono::milliseconds
with_max_duration_sweep(std::chrono::milliseconds current,
                        const std::vector<std::unique_ptr<ShardRoute>>& routes);

} // namespace uringfwd::engine
