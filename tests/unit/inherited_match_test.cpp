// Which inherited listening socket serves which listen address, and which one each
// shard accepts on (engine/net/inherited_match.hpp).
#include "net/inherited_match.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace uringfwd::engine {
namespace {

const Endpoint kWeb = Endpoint::parse("127.0.0.1:8080");
const Endpoint kApi = Endpoint::parse("[::1]:8443");
const Endpoint kUnix = Endpoint::parse("unix:/run/app.sock");

TEST(InheritedMatch, EachSocketGoesToItsAddressInTheOrderGiven) {
    const InheritedPlan plan = match_inherited(
        {kWeb, kApi, kUnix}, {{5, kApi, 1}, {3, kWeb, 2}, {4, kWeb, 3}, {6, kUnix, 4}});
    ASSERT_EQ(plan.per_listener.size(), 3u);
    EXPECT_EQ(plan.per_listener[0], (std::vector<int>{3, 4}));
    EXPECT_EQ(plan.per_listener[1], (std::vector<int>{5}));
    EXPECT_EQ(plan.per_listener[2], (std::vector<int>{6}));
    EXPECT_TRUE(plan.unmatched.empty());
}

TEST(InheritedMatch, DupsOfOneSocketCountOnce) {
    // A process that shared one Unix socket among its shards sends it once per shard.
    const InheritedPlan plan =
        match_inherited({kUnix}, {{3, kUnix, 9}, {4, kUnix, 9}, {5, kUnix, 9}});
    EXPECT_EQ(plan.per_listener[0], (std::vector<int>{3}));
}

TEST(InheritedMatch, ASocketOfNoListenAddressIsUnmatched) {
    const Endpoint other = Endpoint::parse("127.0.0.1:9090");
    const InheritedPlan plan = match_inherited({kWeb}, {{3, other, 1}, {4, kWeb, 2}});
    EXPECT_EQ(plan.per_listener[0], (std::vector<int>{4}));
    ASSERT_EQ(plan.unmatched.size(), 1u);
    EXPECT_EQ(plan.unmatched[0].fd, 3);
}

TEST(InheritedMatch, AnAddressWithoutASocketIsBound) {
    const InheritedPlan plan = match_inherited({kWeb, kApi}, {{3, kWeb, 1}});
    EXPECT_TRUE(plan.per_listener[1].empty());
    EXPECT_EQ(inherited_for_shard(plan.per_listener[1], 0, 4, kApi), -1);
}

TEST(InheritedForShard, OneSocketIsSharedByEveryShard) {
    for (std::size_t shard = 0; shard < 4; ++shard)
        EXPECT_EQ(inherited_for_shard({7}, shard, 4, kWeb), 7);
}

TEST(InheritedForShard, OnePerShardGivesEachItsOwn) {
    const std::vector<int> fds{7, 8, 9};
    for (std::size_t shard = 0; shard < 3; ++shard)
        EXPECT_EQ(inherited_for_shard(fds, shard, 3, kWeb), fds[shard]);
}

TEST(InheritedForShard, AnyOtherCountIsRefusedWithTheAddress) {
    try {
        inherited_for_shard({7, 8}, 0, 3, kWeb);
        FAIL() << "two sockets for three shards must be refused";
    } catch (const std::invalid_argument& e) {
        EXPECT_STREQ(e.what(), "2 inherited listening sockets for 127.0.0.1:8080, but 3 shards: "
                               "need one, or one per shard (start with --shards 2)");
    }
    EXPECT_THROW(inherited_for_shard({7, 8, 9}, 0, 2, kWeb), std::invalid_argument);
}

TEST(InheritedForShard, OneShardIsCountedInTheSingular) {
    try {
        inherited_for_shard({7, 8}, 0, 1, kWeb);
        FAIL() << "two sockets for one shard must be refused";
    } catch (const std::invalid_argument& e) {
        EXPECT_STREQ(e.what(), "2 inherited listening sockets for 127.0.0.1:8080, but 1 shard: "
                               "need one, or one per shard (start with --shards 2)");
    }
}

} // namespace
} // namespace uringfwd::engine
