// Which connections move where when the shards are evened out (Engine::rebalance).
#include "api/rebalance_plan.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

using uringfwd::engine::plan_rebalance;
using uringfwd::engine::ShardMove;

namespace {

// The counts after the plan's moves, checking that no move takes more than its shard has.
std::vector<std::size_t> after(std::vector<std::size_t> open, const std::vector<ShardMove>& plan) {
    for (const ShardMove& m : plan) {
        EXPECT_NE(m.from, m.to);
        EXPECT_GT(m.count, 0u);
        EXPECT_LE(m.count, open[m.from]);
        open[m.from] -= m.count;
        open[m.to] += m.count;
    }
    return open;
}

std::size_t moved(const std::vector<ShardMove>& plan) {
    std::size_t n = 0;
    for (const ShardMove& m : plan)
        n += m.count;
    return n;
}

} // namespace

TEST(PlanRebalance, NothingToDoForOneShardOrEvenOnes) {
    EXPECT_TRUE(plan_rebalance({}).empty());
    EXPECT_TRUE(plan_rebalance({7}).empty());
    EXPECT_TRUE(plan_rebalance({3, 3, 3}).empty());
    EXPECT_TRUE(plan_rebalance({4, 3, 4}).empty()); // one apart is even
}

TEST(PlanRebalance, MovesHalfTheDifferenceBetweenTwo) {
    std::vector<ShardMove> plan = plan_rebalance({10, 0});
    ASSERT_EQ(plan.size(), 1u);
    EXPECT_EQ(plan[0].from, 0u);
    EXPECT_EQ(plan[0].to, 1u);
    EXPECT_EQ(plan[0].count, 5u);
}

TEST(PlanRebalance, TheRemainderStaysWithTheShardsThatHaveMost) {
    // 11 over 2: 6 and 5, and the 6 stays where there were more: one move of 4.
    std::vector<ShardMove> plan = plan_rebalance({1, 10});
    EXPECT_EQ(after({1, 10}, plan), (std::vector<std::size_t>{5, 6}));
    EXPECT_EQ(moved(plan), 4u);
}

TEST(PlanRebalance, LeavesNoShardMoreThanOneAboveAnotherWithTheFewestMoves) {
    const std::vector<std::vector<std::size_t>> cases = {
        {100, 0, 0, 0}, {0, 0, 0, 9}, {5, 1, 9, 2, 8}, {1, 2, 3, 4, 5, 6, 7, 8}, {64, 64, 0, 1}};
    for (const auto& open : cases) {
        std::vector<ShardMove> plan = plan_rebalance(open);
        std::vector<std::size_t> result = after(open, plan);
        auto [lo, hi] = std::minmax_element(result.begin(), result.end());
        EXPECT_LE(*hi - *lo, 1u);
        // The fewest: what lies above the higher of the two targets must move at least.
        std::size_t total = 0;
        for (std::size_t n : open)
            total += n;
        std::size_t ceiling = (total + open.size() - 1) / open.size();
        std::size_t floor = total / open.size();
        std::size_t over = 0, under = 0;
        for (std::size_t n : open) {
            over += n > ceiling ? n - ceiling : 0;
            under += n < floor ? floor - n : 0;
        }
        EXPECT_EQ(moved(plan), std::max(over, under));
    }
}
