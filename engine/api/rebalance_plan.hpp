// Which connections move where to even out the shards (Engine::rebalance): pure, so
// that its arithmetic is tested on its own (tests/unit/rebalance_plan_test.cpp).
#pragma once

#include <cstddef>
#include <vector>

namespace uringfwd::engine {

struct ShardMove {
    std::size_t from = 0;
    std::size_t to = 0;
    std::size_t count = 0;
};

// Given each shard's open connections, the fewest moves after which no shard has more
// than one above another: the shards that have the most keep the remainder's extra
// one, so nothing moves that need not.
std::vector<ShardMove> plan_rebalance(const std::vector<std::size_t>& open);

} // namespace uringfwd::engine
