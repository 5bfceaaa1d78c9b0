// A shard's pool under runtime control (PoolState::set_state(), set_weight(), slow
// start): Drain and Maint take a member out of every policy's choice, a weight set at
// runtime changes the spread, and a member coming up ramps its share over slow_start.
#include "routing/pool_state.hpp"
#include "tests/unit/pool_specs.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace uringfwd::engine {
namespace {

using namespace std::chrono_literals;
using test_pools::keys_of;
using test_pools::pool_of;

const PoolState::Clock::time_point t0{1000s};

// How many of `n` picks at `now` (client hashes 0..n-1) go to each member.
std::vector<int> spread(PoolState& pool, int n, PoolState::Clock::time_point now = t0) {
    std::vector<int> count(pool.size());
    for (int i = 0; i < n; ++i)
        if (auto m = pool.choose(static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15u, {}, now))
            ++count[*m];
    return count;
}

class RuntimeStateAnyPolicy : public ::testing::TestWithParam<BalancePolicy> {};

TEST_P(RuntimeStateAnyPolicy, DrainAndMaintTakeAMemberOutAndReadyBringsItBack) {
    const UpstreamPool config = pool_of(GetParam(), {{1}, {1}, {1}});
    PoolState pool(config, keys_of(config));
    for (MemberState out : {MemberState::Drain, MemberState::Maint}) {
        EXPECT_TRUE(pool.set_state(1, out, t0));
        EXPECT_FALSE(pool.set_state(1, out, t0)); // no change
        EXPECT_EQ(spread(pool, 300)[1], 0);
        EXPECT_EQ(pool.effective_weight(1, t0), 0u);
        EXPECT_TRUE(pool.set_state(1, MemberState::Ready, t0));
        EXPECT_GT(spread(pool, 300)[1], 50);
        EXPECT_EQ(pool.effective_weight(1, t0), 1u);
    }
}

TEST_P(RuntimeStateAnyPolicy, BackupsServeWhileEveryPrimaryIsDrained) {
    UpstreamPool config = pool_of(GetParam(), {{1}, {1}});
    config.members[1].backup = true;
    PoolState pool(config, keys_of(config));
    EXPECT_EQ(spread(pool, 50)[1], 0);
    pool.set_state(0, MemberState::Drain, t0);
    EXPECT_EQ(spread(pool, 50)[1], 50);
}

INSTANTIATE_TEST_SUITE_P(Policies, RuntimeStateAnyPolicy,
                         ::testing::Values(BalancePolicy::RoundRobin, BalancePolicy::LeastActive,
                                           BalancePolicy::Maglev),
                         [](const auto& info) {
                             std::string name(to_string(info.param));
                             std::erase(name, '-');
                             return name;
                         });

TEST(RuntimeWeight, RoundRobinFollowsAWeightSetAtRuntime) {
    const UpstreamPool config = pool_of(BalancePolicy::RoundRobin, {{1}, {1}});
    PoolState pool(config, keys_of(config));
    pool.set_weight(1, 3);
    const std::vector<int> count = spread(pool, 400);
    EXPECT_EQ(count[0], 100);
    EXPECT_EQ(count[1], 300);
}

TEST(RuntimeWeight, MaglevBuildsItsTableAgain) {
    const UpstreamPool config = pool_of(BalancePolicy::Maglev, {{1}, {1}});
    PoolState pool(config, keys_of(config));
    pool.set_weight(1, 4);
    const std::vector<int> count = spread(pool, 5000);
    EXPECT_NEAR(count[1], 4000, 250);
}

TEST(SlowStart, AMemberSetReadyRampsFromNothingToItsWeight) {
    const UpstreamPool config = pool_of(BalancePolicy::RoundRobin, {{10}, {10}});
    PoolState pool(config, keys_of(config));
    pool.set_slow_start(0, 10s);
    pool.set_state(0, MemberState::Drain, t0);
    pool.set_state(0, MemberState::Ready, t0);
    EXPECT_EQ(pool.effective_weight(0, t0 + 1s), 1u);
    EXPECT_EQ(pool.effective_weight(0, t0 + 5s), 5u);
    EXPECT_EQ(pool.effective_weight(0, t0 + 10s), 10u);
    EXPECT_EQ(pool.effective_weight(1, t0 + 1s), 10u);
    // A tenth of the way: weight 1 of 10 against 10, about 1 pick in 11.
    const std::vector<int> early = spread(pool, 1100, t0 + 1s);
    EXPECT_NEAR(early[0], 100, 10);
    const std::vector<int> late = spread(pool, 1000, t0 + 20s);
    EXPECT_NEAR(late[0], 500, 10);
}

TEST(SlowStart, AMemberTheCheckerBringsBackRampsToo) {
    const UpstreamPool config = pool_of(BalancePolicy::LeastActive, {{4}, {4}});
    PoolState pool(config, keys_of(config));
    pool.set_slow_start(1, 4s);
    pool.set_checked_up(1, false, t0);
    EXPECT_EQ(pool.effective_weight(1, t0), 0u);
    pool.set_checked_up(1, true, t0);
    EXPECT_EQ(pool.effective_weight(1, t0 + 2s), 2u);
    // Without a time (as before slow start), no ramp.
    pool.set_checked_up(1, false);
    pool.set_checked_up(1, true);
    EXPECT_EQ(pool.effective_weight(1, t0), 4u);
}

} // namespace
} // namespace uringfwd::engine
