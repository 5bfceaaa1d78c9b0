#include "api/rebalance_plan.hpp"

#include <algorithm>
#include <numeric>

namespace uringfwd::engine {

std::vector<ShardMove> plan_rebalance(const std::vector<std::size_t>& open) {
    const std::size_t n = open.size();
    if (n < 2)
        return {};
    const std::size_t total = std::accumulate(open.begin(), open.end(), std::size_t{0});
    // The `total % n` shards with the most keep one more than the others.
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return open[a] > open[b]; });
    std::vector<std::size_t> target(n, total / n);
    for (std::size_t i = 0; i < total % n; ++i)
        ++target[order[i]];
    std::vector<ShardMove> moves;
    std::size_t to = 0;
    std::vector<std::size_t> have = open;
    for (std::size_t from = 0; from < n; ++from) {
        while (have[from] > target[from]) {
            while (have[to] >= target[to])
                ++to; // one is short as long as one is over: the sums are equal
            const std::size_t count = std::min(have[from] - target[from], target[to] - have[to]);
            moves.push_back({from, to, count});
            have[from] -= count;
            have[to] += count;
        }
    }
    return moves;
}

} // namespace uringfwd::engine
