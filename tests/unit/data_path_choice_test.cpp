// How a direction chooses between the copy and splice paths (DataPath::Auto), and the
// data path's names on the command line.
#include "shard/direction_logic.hpp"

#include <gtest/gtest.h>

#include <cerrno>

using uringfwd::DataPath;
using uringfwd::engine::copy_turns_bulk;
using uringfwd::engine::first_path;
using uringfwd::engine::kFullBuffersForBulk;
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
