// Which CPUs get shards, and when the reuseport steering program can map CPUs to them.
#include "platform/shard_plan.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

using uringfwd::engine::choose_shard_cpus;
using uringfwd::engine::consecutive_base;

TEST(ChooseShardCpus, DefaultsToEveryAllowedCpu) {
    EXPECT_EQ(choose_shard_cpus({0, 1, 2, 3}, {}, 0), (std::vector<int>{0, 1, 2, 3}));
}

TEST(ChooseShardCpus, ShardCountTakesTheFirstCpus) {
    EXPECT_EQ(choose_shard_cpus({2, 3, 4, 5}, {}, 2), (std::vector<int>{2, 3}));
}

TEST(ChooseShardCpus, RequestedCpusMustBeAllowed) {
    EXPECT_EQ(choose_shard_cpus({0, 1, 2, 3}, {3, 1}, 0), (std::vector<int>{3, 1}));
    EXPECT_THROW(choose_shard_cpus({0, 1}, {0, 5}, 0), std::invalid_argument);
}

TEST(ChooseShardCpus, DuplicatesCollapse) {
    EXPECT_EQ(choose_shard_cpus({0, 1}, {1, 1, 0}, 0), (std::vector<int>{1, 0}));
}

TEST(ChooseShardCpus, MoreShardsThanCpusIsAnError) {
    try {
        choose_shard_cpus({0, 1}, {}, 3);
        FAIL() << "no exception";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("3 shards"), std::string::npos) << e.what();
    }
}

TEST(ChooseShardCpus, OneCpuIsCountedInTheSingular) {
    try {
        choose_shard_cpus({0}, {}, 2);
        FAIL() << "no exception";
    } catch (const std::invalid_argument& e) {
        EXPECT_STREQ(e.what(), "2 shards asked for but only 1 CPU to pin them to (0): one shard "
                               "per CPU");
    }
}

TEST(ChooseShardCpus, NoCpuAtAllIsAnError) {
    EXPECT_THROW(choose_shard_cpus({}, {}, 0), std::invalid_argument);
}

TEST(ConsecutiveBase, ConsecutiveCpusInOrder) {
    EXPECT_EQ(consecutive_base({0, 1, 2, 3}), 0);
    EXPECT_EQ(consecutive_base({16, 17}), 16);
    EXPECT_EQ(consecutive_base({5}), 5);
}

TEST(ConsecutiveBase, HolesOrDisorderDefeatTheProgram) {
    EXPECT_EQ(consecutive_base({0, 2}), std::nullopt);
    EXPECT_EQ(consecutive_base({1, 0}), std::nullopt);
    EXPECT_EQ(consecutive_base({0, 1, 2, 3, 16, 17}), std::nullopt);
    EXPECT_EQ(consecutive_base({}), std::nullopt);
}
