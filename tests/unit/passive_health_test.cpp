// Passive health of one member: down after `fall` failures in a row, tried again after
// the backoff, the backoff doubling per failed trial up to its cap, up on a success.
#include "routing/passive_health.hpp"

#include <gtest/gtest.h>

using uringfwd::PassiveHealth;
using uringfwd::engine::PassiveHealthState;
using namespace std::chrono_literals;

namespace {

const PassiveHealthState::Clock::time_point t0{100s};

PassiveHealth config(unsigned fall) {
    PassiveHealth cfg;
    cfg.fall = fall;
    cfg.backoff = 1s;
    cfg.max_backoff = 4s;
    return cfg;
}

} // namespace

TEST(PassiveHealth, DownOnTheFallthFailureInARow) {
    const auto cfg = config(3);
    PassiveHealthState h;
    EXPECT_FALSE(h.failed(cfg, t0));
    EXPECT_FALSE(h.failed(cfg, t0));
    EXPECT_FALSE(h.down(t0));
    EXPECT_TRUE(h.failed(cfg, t0)); // the state change: reported once
    EXPECT_TRUE(h.down(t0));
    EXPECT_TRUE(h.marked_down());
    EXPECT_EQ(h.failures(), 3u);
    EXPECT_EQ(h.down_until(), t0 + 1s);
}

TEST(PassiveHealth, ASuccessBetweenFailuresStartsTheCountAgain) {
    const auto cfg = config(3);
    PassiveHealthState h;
    h.failed(cfg, t0);
    h.failed(cfg, t0);
    EXPECT_FALSE(h.succeeded()); // was not down: no state change
    EXPECT_FALSE(h.failed(cfg, t0));
    EXPECT_FALSE(h.failed(cfg, t0));
    EXPECT_FALSE(h.down(t0));
    EXPECT_TRUE(h.failed(cfg, t0));
}

TEST(PassiveHealth, TriedAgainAfterTheBackoff) {
    const auto cfg = config(1);
    PassiveHealthState h;
    ASSERT_TRUE(h.failed(cfg, t0));
    EXPECT_TRUE(h.down(t0 + 999ms));
    EXPECT_FALSE(h.down(t0 + 1s)); // a trial: may be chosen, still marked
    EXPECT_TRUE(h.marked_down());
}

TEST(PassiveHealth, EachFailedTrialDoublesTheBackoffUpToTheCap) {
    const auto cfg = config(2);
    PassiveHealthState h;
    h.failed(cfg, t0);
    ASSERT_TRUE(h.failed(cfg, t0));
    auto now = t0;
    for (auto expected : {1s, 2s, 4s, 4s, 4s}) {
        EXPECT_EQ(h.backoff(), expected);
        EXPECT_EQ(h.down_until(), now + expected);
        now = h.down_until();
        EXPECT_FALSE(h.down(now));
        EXPECT_FALSE(h.failed(cfg, now)); // the trial fails: down again, no state change
        EXPECT_TRUE(h.down(now));
    }
}

TEST(PassiveHealth, FailuresOfConnectsFromBeforeTheMarkChangeNothing) {
    // Many connects may be in flight when a member dies; their failures arrive while it
    // is already down and must not push the backoff to its cap at once.
    const auto cfg = config(1);
    PassiveHealthState h;
    ASSERT_TRUE(h.failed(cfg, t0));
    for (int i = 0; i < 10; ++i)
        EXPECT_FALSE(h.failed(cfg, t0 + 100ms));
    EXPECT_EQ(h.backoff(), 1s);
    EXPECT_EQ(h.down_until(), t0 + 1s);
}

TEST(PassiveHealth, ASuccessMarksItUpAndResetsTheBackoff) {
    const auto cfg = config(1);
    PassiveHealthState h;
    ASSERT_TRUE(h.failed(cfg, t0));
    h.failed(cfg, t0 + 1s); // failed trial: backoff 2 s
    ASSERT_EQ(h.backoff(), 2s);
    EXPECT_TRUE(h.succeeded()); // the state change
    EXPECT_FALSE(h.marked_down());
    EXPECT_FALSE(h.down(t0 + 1s));
    EXPECT_EQ(h.failures(), 0u);
    EXPECT_FALSE(h.succeeded()); // already up
    // The next outage starts from the first backoff again.
    EXPECT_TRUE(h.failed(cfg, t0 + 10s));
    EXPECT_EQ(h.down_until(), t0 + 11s);
}

TEST(PassiveHealth, FallZeroTurnsItOff) {
    const auto cfg = config(0);
    PassiveHealthState h;
    for (int i = 0; i < 100; ++i)
        EXPECT_FALSE(h.failed(cfg, t0));
    EXPECT_FALSE(h.down(t0));
    EXPECT_FALSE(h.succeeded());
}

TEST(PassiveHealth, AMaxBackoffBelowTheBackoffDoesNotShortenIt) {
    PassiveHealth cfg = config(1);
    cfg.max_backoff = 100ms;
    PassiveHealthState h;
    ASSERT_TRUE(h.failed(cfg, t0));
    EXPECT_EQ(h.backoff(), 1s);
    h.failed(cfg, t0 + 1s);
    EXPECT_EQ(h.backoff(), 1s);
}
