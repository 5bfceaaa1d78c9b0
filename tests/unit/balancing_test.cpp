// A shard's choice of pool member: each policy, backups, full and tried members, health,
// and member limits shared by every shard's pool.
#include "routing/hash.hpp"
#include "routing/pool_state.hpp"
#include "tests/unit/pool_specs.hpp"

#include <algorithm>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

using namespace uringfwd;
using namespace uringfwd::engine;
using namespace uringfwd::engine::test_pools;
using namespace std::chrono_literals;

namespace uringfwd {
// Names the policy in gtest's messages.
void PrintTo(BalancePolicy policy, std::ostream* os) {
    *os << to_string(policy);
}
} // namespace uringfwd

namespace {

const PoolState::Clock::time_point t0{1000s};

PoolState state_of(BalancePolicy policy, const std::vector<MemberSpec>& specs) {
    const UpstreamPool pool = pool_of(policy, specs);
    return PoolState(pool, keys_of(pool));
}

std::size_t pick(PoolState& pool, uint64_t client = 0, const TriedSet& tried = {}) {
    const auto m = pool.choose(client, tried, t0);
    EXPECT_TRUE(m);
    return m.value_or(999);
}

// Marks `m` passively down at t0 (fall = 3 by default).
void fail_member(PoolState& pool, std::size_t m) {
    for (int i = 0; i < 3; ++i)
        pool.connect_failed(m, t0);
    ASSERT_FALSE(pool.up(m, t0));
}

} // namespace

// ---- round-robin

TEST(RoundRobin, WeightsFiveOneOneGiveNginxsSequence) {
    // Derived by hand from the rule (add weights, take the largest, subtract 7):
    // currents (5,1,1) a, (3,2,2) a, (1,3,3) b, (6,-3,4) a, (4,-2,5) c, (9,-1,-1) a,
    // (7,0,0) a, back to (0,0,0). nginx's comment in ngx_http_upstream_round_robin.c
    // gives the same { a, a, b, a, c, a, a }.
    PoolState pool = state_of(BalancePolicy::RoundRobin, {{5}, {1}, {1}});
    const std::vector<std::size_t> expected{0, 0, 1, 0, 2, 0, 0};
    for (int round = 0; round < 3; ++round)
        for (std::size_t want : expected)
            EXPECT_EQ(pick(pool), want) << "round " << round;
}

TEST(RoundRobin, SharesFollowTheWeights) {
    PoolState pool = state_of(BalancePolicy::RoundRobin, {{1}, {2}, {3}});
    std::vector<int> count(3);
    for (int i = 0; i < 3000; ++i)
        ++count[pick(pool)];
    EXPECT_NEAR(count[0], 500, 25);
    EXPECT_NEAR(count[1], 1000, 50);
    EXPECT_NEAR(count[2], 1500, 75);
}

TEST(RoundRobin, EqualWeightsAlternate) {
    PoolState pool = state_of(BalancePolicy::RoundRobin, {{}, {}, {}});
    for (int i = 0; i < 9; ++i)
        EXPECT_EQ(pick(pool), std::size_t(i % 3));
}

// ---- least-active

TEST(LeastActive, ASlowMemberGetsNoNewConnections) {
    PoolState pool = state_of(BalancePolicy::LeastActive, {{}, {}, {}});
    for (int i = 0; i < 50; ++i)
        pool.opened(1); // connections that stay open: a slow member
    std::vector<int> count(3);
    for (int i = 0; i < 40; ++i) {
        const std::size_t m = pick(pool);
        ++count[m];
        pool.opened(m);
    }
    EXPECT_EQ(count[1], 0);
    EXPECT_EQ(count[0], 20);
    EXPECT_EQ(count[2], 20);
    // Its connections end: it takes the new ones until it has as many as the others.
    for (int i = 0; i < 50; ++i)
        pool.closed(1, SharedLimit::Taken::Free);
    for (int i = 0; i < 20; ++i) {
        EXPECT_EQ(pick(pool), 1u) << i;
        pool.opened(1);
    }
}

TEST(LeastActive, OpenConnectionsFollowTheWeights) {
    PoolState pool = state_of(BalancePolicy::LeastActive, {{3}, {1}});
    for (int i = 0; i < 400; ++i)
        pool.opened(pick(pool)); // none closes
    EXPECT_NEAR(double(pool.member(0).active), 300, 2);
    EXPECT_NEAR(double(pool.member(1).active), 100, 2);
}

TEST(LeastActive, EqualMembersShareShortConnections) {
    // Every connection closes before the next: all members stay at 0 active, a tie at
    // every pick, which must not always go to the same member.
    PoolState pool = state_of(BalancePolicy::LeastActive, {{2}, {1}, {1}});
    std::vector<int> count(3);
    for (int i = 0; i < 400; ++i) {
        const std::size_t m = pick(pool);
        ++count[m];
        pool.opened(m);
        pool.closed(m, SharedLimit::Taken::Free);
    }
    EXPECT_EQ(count[0], 200);
    EXPECT_EQ(count[1], 100);
    EXPECT_EQ(count[2], 100);
}

// ---- Maglev

TEST(MaglevPool, TheSameClientGetsTheSameMember) {
    PoolState pool = state_of(BalancePolicy::Maglev, {{}, {}, {}, {}});
    std::map<std::size_t, int> seen;
    for (uint64_t client = 0; client < 200; ++client) {
        const uint64_t h = stable_hash(std::to_string(client));
        const std::size_t first = pick(pool, h);
        EXPECT_EQ(pick(pool, h), first);
        ++seen[first];
    }
    EXPECT_EQ(seen.size(), 4u);
}

TEST(MaglevPool, ADownMemberMovesOnlyItsOwnClients) {
    PoolState pool = state_of(BalancePolicy::Maglev, {{}, {}, {}, {}});
    std::vector<std::size_t> home;
    for (uint64_t client = 0; client < 1000; ++client)
        home.push_back(pick(pool, stable_hash(std::to_string(client))));
    fail_member(pool, 2);
    for (uint64_t client = 0; client < 1000; ++client) {
        const std::size_t now_on = pick(pool, stable_hash(std::to_string(client)));
        if (home[client] == 2)
            EXPECT_NE(now_on, 2u);
        else
            EXPECT_EQ(now_on, home[client]);
    }
    // Back up: everyone is home again.
    pool.connect_succeeded(2);
    for (uint64_t client = 0; client < 1000; ++client)
        EXPECT_EQ(pick(pool, stable_hash(std::to_string(client))), home[client]);
}

TEST(MaglevPool, ARetryGoesToAnotherMember) {
    PoolState pool = state_of(BalancePolicy::Maglev, {{}, {}, {}});
    const uint64_t h = stable_hash("client");
    TriedSet tried;
    for (int attempt = 0; attempt < 3; ++attempt) {
        const std::size_t m = pick(pool, h, tried);
        EXPECT_FALSE(tried.contains(m));
        tried.add(m);
    }
    EXPECT_FALSE(pool.choose(h, tried, t0));
}

TEST(MaglevPool, NeedsOneKeyPerMember) {
    const UpstreamPool pool = pool_of(BalancePolicy::Maglev, {{}, {}});
    const std::vector<std::string> one_key{"10.0.0.1:80"};
    EXPECT_THROW(PoolState(pool, one_key), std::invalid_argument);
    // The other policies need none.
    EXPECT_NO_THROW(PoolState(pool_of(BalancePolicy::RoundRobin, {{}, {}}), {}));
}

TEST(MaglevPool, BackupsHaveTheirOwnTable) {
    PoolState pool = state_of(BalancePolicy::Maglev, {{}, {}, {1, true}, {1, true}});
    fail_member(pool, 0);
    fail_member(pool, 1);
    std::map<std::size_t, int> seen;
    for (uint64_t client = 0; client < 200; ++client)
        ++seen[pick(pool, stable_hash(std::to_string(client)))];
    EXPECT_EQ(seen.size(), 2u);
    EXPECT_GT(seen[2], 50);
    EXPECT_GT(seen[3], 50);
}

// ---- candidates, for every policy

class EveryPolicy : public testing::TestWithParam<BalancePolicy> {};

TEST_P(EveryPolicy, BackupsOnlyWhileNoPrimaryIsUp) {
    PoolState pool = state_of(GetParam(), {{}, {1, true}, {}});
    for (int i = 0; i < 10; ++i)
        EXPECT_NE(pick(pool, stable_hash(std::to_string(i))), 1u);
    fail_member(pool, 0);
    for (int i = 0; i < 10; ++i)
        EXPECT_EQ(pick(pool, stable_hash(std::to_string(i))), 2u);
    pool.set_checked_up(2, false); // the active checker's verdict counts too
    for (int i = 0; i < 10; ++i)
        EXPECT_EQ(pick(pool, stable_hash(std::to_string(i))), 1u);
    pool.set_checked_up(2, true);
    EXPECT_EQ(pick(pool), 2u);
}

TEST_P(EveryPolicy, NoBackupWhileAPrimaryIsUpButFull) {
    PoolState pool = state_of(GetParam(), {{1, false, 1}, {1, true}, {}});
    fail_member(pool, 2);
    const SharedLimit::Taken taken = pool.opened(0); // member 0 is full (1 at most)
    EXPECT_EQ(taken, SharedLimit::Taken::Counted);
    EXPECT_FALSE(pool.choose(0, {}, t0));
    EXPECT_TRUE(pool.only_full_left({}, t0)); // a client may wait for it
    pool.closed(0, taken);
    EXPECT_EQ(pick(pool), 0u);
}

// Issue 20: the connection's retry after a primary refused goes to a backup while that
// primary is still up for everyone else (not yet marked down).
TEST_P(EveryPolicy, ABackupTakesTheRetryOnceEveryPrimaryUpIsTried) {
    PoolState pool = state_of(GetParam(), {{}, {1, true}, {}});
    fail_member(pool, 2);
    TriedSet tried;
    tried.add(0);
    EXPECT_EQ(pick(pool, 0, tried), 1u);
    EXPECT_EQ(pick(pool), 0u); // a new connection still goes to the primary
    // With two primaries up, the other primary comes first.
    PoolState two = state_of(GetParam(), {{}, {1, true}, {}});
    for (int i = 0; i < 10; ++i) {
        TriedSet one;
        one.add(0);
        EXPECT_EQ(pick(two, stable_hash(std::to_string(i)), one), 2u);
    }
}

TEST_P(EveryPolicy, AFullMemberIsSkipped) {
    PoolState pool = state_of(GetParam(), {{1, false, 2}, {1, false, 0}});
    EXPECT_EQ(pool.opened(0), SharedLimit::Taken::Counted);
    EXPECT_EQ(pool.opened(0), SharedLimit::Taken::Counted);
    EXPECT_EQ(pool.opened(0), SharedLimit::Taken::No); // nothing counted
    EXPECT_EQ(pool.member(0).active, 2u);
    EXPECT_TRUE(pool.full(0));
    EXPECT_FALSE(pool.full(1));
    EXPECT_EQ(pool.opened(1), SharedLimit::Taken::Free); // no limit: none to give back
    for (int i = 0; i < 20; ++i)
        EXPECT_EQ(pick(pool, stable_hash(std::to_string(i))), 1u);
    pool.closed(0, SharedLimit::Taken::Counted);
    EXPECT_FALSE(pool.full(0));
}

TEST_P(EveryPolicy, TriedMembersAreSkipped) {
    PoolState pool = state_of(GetParam(), {{}, {}, {}});
    for (int i = 0; i < 20; ++i) {
        const uint64_t h = stable_hash(std::to_string(i));
        TriedSet tried;
        const std::size_t first = pick(pool, h, tried);
        tried.add(first);
        const std::size_t second = pick(pool, h, tried);
        EXPECT_NE(second, first);
        tried.add(second);
        const std::size_t third = pick(pool, h, tried);
        EXPECT_NE(third, first);
        EXPECT_NE(third, second);
        tried.add(third);
        EXPECT_FALSE(pool.choose(h, tried, t0));
    }
}

TEST_P(EveryPolicy, NothingWhenNoMemberIsUp) {
    PoolState pool = state_of(GetParam(), {{}, {1, true}});
    fail_member(pool, 0);
    pool.set_checked_up(1, false);
    EXPECT_FALSE(pool.choose(0, {}, t0));
    EXPECT_FALSE(state_of(GetParam(), {}).choose(0, {}, t0)); // an empty pool
}

TEST_P(EveryPolicy, ADownMemberIsChosenAgainAfterItsBackoff) {
    PoolState pool = state_of(GetParam(), {{}, {}});
    fail_member(pool, 0); // backoff 1 s (the default)
    for (int i = 0; i < 10; ++i)
        EXPECT_EQ(pool.choose(stable_hash(std::to_string(i)), {}, t0 + 999ms), 1u);
    bool chosen = false;
    for (int i = 0; i < 10 && !chosen; ++i)
        chosen = pool.choose(stable_hash(std::to_string(i)), {}, t0 + 1s) == 0u;
    EXPECT_TRUE(chosen);
}

INSTANTIATE_TEST_SUITE_P(Policies, EveryPolicy,
                         testing::Values(BalancePolicy::RoundRobin, BalancePolicy::LeastActive,
                                         BalancePolicy::Maglev),
                         [](const auto& info) {
                             std::string name(to_string(info.param));
                             name.erase(std::remove(name.begin(), name.end(), '-'), name.end());
                             return name;
                         });

// ---- health state changes through the pool

TEST(PoolHealth, StateChangesAreReportedOnce) {
    PoolState pool = state_of(BalancePolicy::RoundRobin, {{}, {}});
    EXPECT_FALSE(pool.connect_failed(0, t0));
    EXPECT_FALSE(pool.connect_failed(0, t0));
    EXPECT_TRUE(pool.connect_failed(0, t0));       // fall = 3: down
    EXPECT_FALSE(pool.connect_failed(0, t0 + 1s)); // a failed trial: still down
    EXPECT_FALSE(pool.up(0, t0 + 2s));
    EXPECT_TRUE(pool.connect_succeeded(0)); // up
    EXPECT_FALSE(pool.connect_succeeded(0));
    EXPECT_TRUE(pool.up(0, t0));

    EXPECT_TRUE(pool.set_checked_up(1, false));
    EXPECT_FALSE(pool.set_checked_up(1, false));
    EXPECT_FALSE(pool.up(1, t0));
    EXPECT_TRUE(pool.set_checked_up(1, true));
}

TEST(PoolHealth, PassiveHealthCanBeTurnedOff) {
    UpstreamPool config = pool_of(BalancePolicy::RoundRobin, {{}, {}});
    config.passive.fall = 0;
    PoolState pool(config, {});
    for (int i = 0; i < 10; ++i)
        EXPECT_FALSE(pool.connect_failed(0, t0));
    EXPECT_TRUE(pool.up(0, t0));
}

// ---- limits shared by the shards

TEST(SharedMemberLimit, EveryShardsPoolCountsAgainstOneLimit) {
    const UpstreamPool config = pool_of(BalancePolicy::RoundRobin, {{1, false, 3}, {}});
    SharedLimit first(3, 2);
    SharedLimit second(0, 2);
    const std::vector<SharedLimit*> limits{&first, &second};
    PoolState shard0(config, {}, limits);
    PoolState shard1(config, {}, limits);
    EXPECT_EQ(shard0.opened(0), SharedLimit::Taken::Counted);
    EXPECT_EQ(shard1.opened(0), SharedLimit::Taken::Counted);
    EXPECT_EQ(shard1.opened(0), SharedLimit::Taken::Counted);
    EXPECT_TRUE(shard0.full(0)); // 1 here and 2 on the other shard
    EXPECT_EQ(shard0.opened(0), SharedLimit::Taken::No);
    EXPECT_EQ(shard0.member(0).active, 1u); // each shard still balances by its own
    shard1.closed(0, SharedLimit::Taken::Counted);
    EXPECT_FALSE(shard0.full(0));
    EXPECT_EQ(first.used(), 2u);
    EXPECT_THROW(PoolState(config, {}, std::vector<SharedLimit*>{&first}), std::invalid_argument);
}

// ---- the tried set

TEST(TriedSet, HoldsWhatWasAddedAndForgetsTheOldestBeyondItsCapacity) {
    TriedSet tried;
    EXPECT_TRUE(tried.empty());
    for (std::size_t m = 0; m < TriedSet::kCapacity; ++m)
        tried.add(m * 10);
    for (std::size_t m = 0; m < TriedSet::kCapacity; ++m)
        EXPECT_TRUE(tried.contains(m * 10));
    EXPECT_FALSE(tried.contains(5));
    tried.add(5);
    EXPECT_TRUE(tried.contains(5));
    EXPECT_FALSE(tried.contains(0)); // the oldest
    EXPECT_EQ(tried.size(), TriedSet::kCapacity);
    tried.clear();
    EXPECT_FALSE(tried.contains(5));
}
