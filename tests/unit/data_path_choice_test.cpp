// How a direction chooses between the copy and splice paths (DataPath::Auto), and the
// data path's names on the command line.
#include "shard/directions/direction_logic.hpp"

#include <gtest/gtest.h>

#include <cerrno>

using uringfwd::DataPath;
using uringfwd::engine::bulk_receive_len;
using uringfwd::engine::bulk_turns_small;
using uringfwd::engine::copy_may_receive;
using uringfwd::engine::copy_turns_bulk;
using uringfwd::engine::copy_uses_bulk_buffers;
using uringfwd::engine::first_path;
using uringfwd::engine::kBundleBuffers;
using uringfwd::engine::kFullBuffersForBulk;
using uringfwd::engine::kMaxBulkHeld;
using uringfwd::engine::kMaxChunks;
using uringfwd::engine::kMaxSmallHeld;
using uringfwd::engine::kSmallReadsForCopy;
using uringfwd::engine::Path;
using uringfwd::engine::splice_turns_small;

namespace {
constexpr std::size_t kBuffer = 32 * 1024;
constexpr std::size_t kPipe = 1 << 20;
} // namespace

TEST(FirstPath, AutoAndCopyStartCopyingSpliceSplices) {
    EXPECT_EQ(first_path(DataPath::Auto), Path::Copy);
    EXPECT_EQ(first_path(DataPath::Copy), Path::Copy);
    EXPECT_EQ(first_path(DataPath::Splice), Path::Splice);
}

TEST(CopyTurnsBulk, TwoFullBuffersInARowTurnAutoToSplice) {
    uint8_t streak = 0;
    EXPECT_FALSE(copy_turns_bulk(DataPath::Auto, kBuffer, kBuffer, streak));
    EXPECT_EQ(streak, 1);
    EXPECT_TRUE(copy_turns_bulk(DataPath::Auto, kBuffer, kBuffer, streak));
    static_assert(kFullBuffersForBulk == 2);
}

TEST(CopyTurnsBulk, ASmallReceiveBreaksTheStreak) {
    uint8_t streak = 0;
    EXPECT_FALSE(copy_turns_bulk(DataPath::Auto, kBuffer, kBuffer, streak));
    EXPECT_FALSE(copy_turns_bulk(DataPath::Auto, kBuffer - 1, kBuffer, streak));
    EXPECT_EQ(streak, 0);
    EXPECT_FALSE(copy_turns_bulk(DataPath::Auto, kBuffer, kBuffer, streak));
    EXPECT_TRUE(copy_turns_bulk(DataPath::Auto, kBuffer, kBuffer, streak));
}

TEST(CopyTurnsBulk, SmallMessagesNeverTurnBulk) {
    uint8_t streak = 0;
    for (int i = 0; i < 1000; ++i)
        ASSERT_FALSE(copy_turns_bulk(DataPath::Auto, 16 * 1024, kBuffer, streak));
}

TEST(CopyTurnsBulk, CopyModeNeverLeavesCopy) {
    uint8_t streak = 0;
    for (int i = 0; i < 10; ++i)
        ASSERT_FALSE(copy_turns_bulk(DataPath::Copy, kBuffer, kBuffer, streak));
    EXPECT_EQ(streak, kFullBuffersForBulk); // counted, but saturating
}

TEST(SpliceTurnsSmall, TwoSmallReadsInARowTurnAutoBackToCopy) {
    uint8_t streak = 0;
    EXPECT_FALSE(splice_turns_small(DataPath::Auto, 1, kPipe, streak));
    EXPECT_TRUE(splice_turns_small(DataPath::Auto, 65535, kPipe, streak));
    static_assert(kSmallReadsForCopy == 2);
}

TEST(SpliceTurnsSmall, ABulkReadBreaksTheStreak) {
    uint8_t streak = 0;
    EXPECT_FALSE(splice_turns_small(DataPath::Auto, 100, kPipe, streak));
    EXPECT_FALSE(splice_turns_small(DataPath::Auto, 65536, kPipe, streak));
    EXPECT_EQ(streak, 0);
    EXPECT_FALSE(splice_turns_small(DataPath::Auto, 100, kPipe, streak));
}

TEST(SpliceTurnsSmall, EagainAndEofNeitherCountNorBreak) {
    uint8_t streak = 0;
    EXPECT_FALSE(splice_turns_small(DataPath::Auto, 100, kPipe, streak));
    EXPECT_FALSE(splice_turns_small(DataPath::Auto, -EAGAIN, kPipe, streak));
    EXPECT_FALSE(splice_turns_small(DataPath::Auto, 0, kPipe, streak));
    EXPECT_EQ(streak, 1);
    EXPECT_TRUE(splice_turns_small(DataPath::Auto, 100, kPipe, streak));
}

TEST(SpliceTurnsSmall, SpliceModeNeverCopies) {
    uint8_t streak = 0;
    for (int i = 0; i < 10; ++i)
        ASSERT_FALSE(splice_turns_small(DataPath::Splice, 1, kPipe, streak));
}

TEST(DataPathName, RoundTripsAndRejectsOthers) {
    for (DataPath p : {DataPath::Splice, DataPath::Copy, DataPath::Auto})
        EXPECT_EQ(uringfwd::parse_data_path(uringfwd::to_string(p)), p);
    EXPECT_FALSE(uringfwd::parse_data_path("Copy"));
    EXPECT_FALSE(uringfwd::parse_data_path(""));
    EXPECT_FALSE(uringfwd::parse_data_path("zero-copy"));
}

TEST(CopyUsesBulkBuffers, OnlyCopyModeWithBulkBuffersAfterTwoFullOnes) {
    EXPECT_FALSE(copy_uses_bulk_buffers(DataPath::Copy, true, 1));
    EXPECT_TRUE(copy_uses_bulk_buffers(DataPath::Copy, true, kFullBuffersForBulk));
    EXPECT_FALSE(copy_uses_bulk_buffers(DataPath::Copy, false, kFullBuffersForBulk));
    // Auto's bulk directions splice (measured cheaper per GB), Splice never copies.
    EXPECT_FALSE(copy_uses_bulk_buffers(DataPath::Auto, true, kFullBuffersForBulk));
    EXPECT_FALSE(copy_uses_bulk_buffers(DataPath::Splice, true, kFullBuffersForBulk));
}

TEST(BulkTurnsSmall, TwoReceivesBelowASmallBufferInARowGoBack) {
    uint8_t streak = 0;
    EXPECT_FALSE(bulk_turns_small(100, kBuffer, streak));
    EXPECT_FALSE(bulk_turns_small(static_cast<int>(kBuffer), kBuffer, streak)); // breaks it
    EXPECT_EQ(streak, 0);
    EXPECT_FALSE(bulk_turns_small(100, kBuffer, streak));
    EXPECT_TRUE(bulk_turns_small(static_cast<int>(kBuffer) - 1, kBuffer, streak));
}

TEST(BulkTurnsSmall, EofAndErrorsNeitherCountNorBreak) {
    uint8_t streak = 0;
    EXPECT_FALSE(bulk_turns_small(100, kBuffer, streak));
    EXPECT_FALSE(bulk_turns_small(0, kBuffer, streak));
    EXPECT_FALSE(bulk_turns_small(-ECONNRESET, kBuffer, streak));
    EXPECT_EQ(streak, 1);
}

TEST(CopyMayReceive, SmallDirectionsHoldTwoBulkOnesUpToTheirCap) {
    EXPECT_TRUE(copy_may_receive(false, 0, 0));
    EXPECT_TRUE(copy_may_receive(false, kMaxSmallHeld - 1, kMaxSmallHeld - 1));
    EXPECT_FALSE(copy_may_receive(false, kMaxSmallHeld, kMaxSmallHeld));
    EXPECT_TRUE(copy_may_receive(true, 0, 0));
    EXPECT_TRUE(copy_may_receive(true, kMaxBulkHeld - 1, 0));
    EXPECT_FALSE(copy_may_receive(true, kMaxBulkHeld, 0));
    // A small buffer still held: a bundle waits, so what it may take stays bounded.
    EXPECT_FALSE(copy_may_receive(true, 1, 1));
    static_assert(kMaxBulkHeld <= kMaxChunks && kBundleBuffers <= kMaxBulkHeld);
}

TEST(BulkReceiveLen, ABundleAsksForWhatMayStillBeHeldAtMostFourBuffers) {
    constexpr std::size_t kBig = 256 * 1024;
    EXPECT_EQ(bulk_receive_len(true, 0, kBig), kBundleBuffers * kBig);
    EXPECT_EQ(bulk_receive_len(true, kMaxBulkHeld - 2, kBig), 2 * kBig);
    EXPECT_EQ(bulk_receive_len(true, kMaxBulkHeld, kBig), kBig); // never 0: that means no cap
    EXPECT_EQ(bulk_receive_len(false, 0, kBig), kBig);
}
