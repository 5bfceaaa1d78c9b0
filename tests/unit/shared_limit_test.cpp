// The counter the shards share for an engine-wide limit: units taken up to the limit,
// none counted without one, and the shards that want room named to whoever gives it
// back.
#include "routing/shared_limit.hpp"

#include <gtest/gtest.h>

#include <vector>

using namespace uringfwd::engine;

namespace {

std::vector<std::size_t> wanting(const SharedLimit& limit, std::size_t self) {
    std::vector<std::size_t> out;
    limit.for_each_wanting(self, [&](std::size_t s) { out.push_back(s); });
    return out;
}

} // namespace

TEST(SharedLimit, TakesUpToTheLimitAndCountsWhatIsGivenBack) {
    SharedLimit limit(2, 4);
    EXPECT_EQ(limit.try_take(), SharedLimit::Taken::Counted);
    EXPECT_FALSE(limit.full());
    EXPECT_EQ(limit.try_take(), SharedLimit::Taken::Counted);
    EXPECT_TRUE(limit.full());
    EXPECT_EQ(limit.try_take(), SharedLimit::Taken::No);
    EXPECT_EQ(limit.used(), 2u);
    limit.give_back();
    EXPECT_EQ(limit.try_take(), SharedLimit::Taken::Counted);
    limit.take(); // past the limit: counted all the same
    EXPECT_EQ(limit.used(), 3u);
    limit.give_back();
    EXPECT_EQ(limit.try_take(), SharedLimit::Taken::No); // 2 of 2 still
}

TEST(SharedLimit, NoLimitCountsNothing) {
    SharedLimit limit(0, 1);
    for (int i = 0; i < 10; ++i)
        EXPECT_EQ(limit.try_take(), SharedLimit::Taken::Free);
    EXPECT_EQ(limit.used(), 0u);
    EXPECT_FALSE(limit.full());
    limit.set_limit(1); // a reload: counting starts
    EXPECT_EQ(limit.try_take(), SharedLimit::Taken::Counted);
    EXPECT_TRUE(limit.full());
}

TEST(SharedLimit, NamesTheOtherShardsThatWantRoom) {
    SharedLimit limit(1, 130); // three words of bits
    EXPECT_FALSE(limit.anyone_wants());
    for (std::size_t s : {0u, 3u, 64u, 129u})
        limit.want(s);
    EXPECT_TRUE(limit.anyone_wants());
    EXPECT_EQ(wanting(limit, 3), (std::vector<std::size_t>{0, 64, 129}));
    limit.unwant(64);
    limit.unwant(64); // twice: no harm
    EXPECT_EQ(wanting(limit, 7), (std::vector<std::size_t>{0, 3, 129}));
    for (std::size_t s : {0u, 3u, 129u})
        limit.unwant(s);
    EXPECT_FALSE(limit.anyone_wants());
}
