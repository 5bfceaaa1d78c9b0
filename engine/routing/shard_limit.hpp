// Limits in the configuration (a member's or a route's max_connections) are for the
// whole engine, but shards share nothing: each enforces its own part. Rounding up keeps
// the engine-wide total at least the configured limit and never leaves a shard at zero,
// which would mean "no limit" (route.hpp).
#pragma once

#include <cstddef>

namespace uringfwd::engine {

// `limit` split among `shards` (0 counts as 1), rounded up; 0 (no limit) stays 0.
// 10 over 3 shards: 4 each.
constexpr std::size_t per_shard_limit(std::size_t limit, std::size_t shards) {
    if (limit == 0)
        return 0;
    if (shards == 0)
        shards = 1;
    return (limit + shards - 1) / shards;
}

} // namespace uringfwd::engine
