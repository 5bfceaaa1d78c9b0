// A burst of identical failures yields a few lines, then a count of the rest.
#include "support/log_throttle.hpp"

#include <gtest/gtest.h>

using uringfwd::engine::LogThrottle;
using namespace std::chrono_literals;

TEST(LogThrottle, AllowsABurstPerWindow) {
    LogThrottle t(3, 1s);
    LogThrottle::Clock::time_point now{10s};
    EXPECT_TRUE(t.allow(now));
    EXPECT_TRUE(t.allow(now));
    EXPECT_TRUE(t.allow(now + 100ms));
    EXPECT_FALSE(t.allow(now + 200ms));
    EXPECT_FALSE(t.allow(now + 900ms));
}

TEST(LogThrottle, TheNextLineCountsWhatWasLeftOut) {
    LogThrottle t(1, 1s);
    LogThrottle::Clock::time_point now{10s};
    ASSERT_TRUE(t.allow(now));
    EXPECT_EQ(t.suppressed(), 0u);
    for (int i = 0; i < 41; ++i)
        EXPECT_FALSE(t.allow(now + 10ms));
    ASSERT_TRUE(t.allow(now + 1s));
    EXPECT_EQ(t.suppressed(), 41u);
    ASSERT_TRUE(t.allow(now + 3s));
    EXPECT_EQ(t.suppressed(), 0u);
}

// Every throttled message ends in the same words.
TEST(LogThrottle, TheNoteSaysHowManyMoreWereSuppressed) {
    EXPECT_EQ(uringfwd::engine::suppressed_note(0), "");
    EXPECT_EQ(uringfwd::engine::suppressed_note(1), " (1 more suppressed)");
    EXPECT_EQ(uringfwd::engine::suppressed_note(41), " (41 more suppressed)");
}
