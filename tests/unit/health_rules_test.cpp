// The health checker's decisions: rise/fall thresholds over results in a row, and
// judging a reply against `expect` as its bytes arrive.
#include "health/health_rules.hpp"

#include <gtest/gtest.h>

using uringfwd::engine::judge_reply;
using uringfwd::engine::ReplyVerdict;
using uringfwd::engine::RiseFall;
using Change = RiseFall::Change;

TEST(RiseFall, AnUpTargetGoesDownAfterFallFailuresInARow) {
    RiseFall rf(/*up=*/true, /*rise=*/2, /*fall=*/3);
    EXPECT_EQ(rf.record(false), Change::None);
    EXPECT_EQ(rf.record(false), Change::None);
    EXPECT_TRUE(rf.up());
    EXPECT_EQ(rf.record(false), Change::WentDown);
    EXPECT_FALSE(rf.up());
    EXPECT_EQ(rf.streak(), 3u);
    // Further failures change nothing, and are still counted in the streak.
    EXPECT_EQ(rf.record(false), Change::None);
    EXPECT_EQ(rf.streak(), 4u);
}

TEST(RiseFall, ADownTargetComesUpAfterRisePassesInARow) {
    RiseFall rf(/*up=*/false, /*rise=*/2, /*fall=*/3);
    EXPECT_EQ(rf.record(true), Change::None);
    EXPECT_FALSE(rf.up());
    EXPECT_EQ(rf.record(true), Change::WentUp);
    EXPECT_TRUE(rf.up());
    EXPECT_EQ(rf.streak(), 2u);
}

TEST(RiseFall, OneResultAgainstTheRunResetsIt) {
    RiseFall rf(/*up=*/true, /*rise=*/2, /*fall=*/3);
    rf.record(false);
    rf.record(false);
    EXPECT_EQ(rf.record(true), Change::None); // passes while up: nothing to change
    EXPECT_EQ(rf.record(false), Change::None);
    EXPECT_EQ(rf.record(false), Change::None);
    EXPECT_TRUE(rf.up());
    EXPECT_EQ(rf.record(false), Change::WentDown);

    EXPECT_EQ(rf.record(true), Change::None);
    EXPECT_EQ(rf.record(false), Change::None); // a flapping member stays down
    EXPECT_EQ(rf.record(true), Change::None);
    EXPECT_EQ(rf.record(true), Change::WentUp);
}

TEST(RiseFall, ZeroThresholdsActAsOne) {
    RiseFall rf(/*up=*/true, /*rise=*/0, /*fall=*/0);
    EXPECT_EQ(rf.record(false), Change::WentDown);
    EXPECT_EQ(rf.record(true), Change::WentUp);
}

TEST(JudgeReply, APrefixOfExpectNeedsMore) {
    EXPECT_EQ(judge_reply("+PONG\r\n", ""), ReplyVerdict::NeedMore);
    EXPECT_EQ(judge_reply("+PONG\r\n", "+PO"), ReplyVerdict::NeedMore);
}

TEST(JudgeReply, AllOfExpectPasses) {
    EXPECT_EQ(judge_reply("+PONG\r\n", "+PONG\r\n"), ReplyVerdict::Pass);
    EXPECT_EQ(judge_reply("", ""), ReplyVerdict::Pass);
}

TEST(JudgeReply, TheFirstDifferentByteFails) {
    EXPECT_EQ(judge_reply("+PONG\r\n", "-"), ReplyVerdict::Fail);
    EXPECT_EQ(judge_reply("+PONG\r\n", "+PONX"), ReplyVerdict::Fail);
    EXPECT_EQ(judge_reply("+PONG\r\n", "-ERR\r\n"), ReplyVerdict::Fail);
}
