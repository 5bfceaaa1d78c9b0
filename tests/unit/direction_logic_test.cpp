// The decisions a direction takes after each splice, one case per rule.
#include "shard/directions/direction_logic.hpp"

#include <gtest/gtest.h>

#include <cerrno>

using uringfwd::engine::after_drain;
using uringfwd::engine::after_pair;
using uringfwd::engine::Next;

namespace {
constexpr std::size_t kCap = 1 << 20;
}

TEST(AfterPair, EverythingDeliveredFromABulkReadSplicesAgain) {
    EXPECT_EQ(after_pair({static_cast<int>(kCap), static_cast<int>(kCap), 0, kCap}),
              Next::SpliceAgain);
    EXPECT_EQ(after_pair({65536, 65536, 0, kCap}), Next::SpliceAgain);
    // A small pipe: half of it counts as bulk.
    EXPECT_EQ(after_pair({4096, 4096, 0, 8192}), Next::SpliceAgain);
}

TEST(AfterPair, EverythingDeliveredFromASmallReadWaitsForPollin) {
    EXPECT_EQ(after_pair({65535, 65535, 0, kCap}), Next::WaitReadable);
    EXPECT_EQ(after_pair({1000, 1000, 0, kCap}), Next::WaitReadable);
    EXPECT_EQ(after_pair({1, 1, 0, kCap}), Next::WaitReadable);
    EXPECT_EQ(after_pair({4095, 4095, 0, 8192}), Next::WaitReadable);
}

TEST(BulkThreshold, IsTheSmallerOf64KiBAndHalfThePipe) {
    using uringfwd::engine::bulk_threshold;
    EXPECT_EQ(bulk_threshold(kCap), 65536u);
    EXPECT_EQ(bulk_threshold(65536), 32768u);
    EXPECT_EQ(bulk_threshold(8192), 4096u);
}

TEST(AfterPair, BytesLeftInThePipeWaitForPollout) {
    EXPECT_EQ(after_pair({65536, 1000, 64536, kCap}), Next::WaitWritable);
    EXPECT_EQ(after_pair({65536, -EAGAIN, 65536, kCap}), Next::WaitWritable);
}

TEST(AfterPair, EofWithEmptyPipeEndsTheSource) {
    // The second splice finds an empty pipe and, being non-blocking, says -EAGAIN.
    EXPECT_EQ(after_pair({0, -EAGAIN, 0, kCap}), Next::SourceEnded);
}

TEST(AfterPair, SpuriousWakeupGoesBackToPolling) {
    EXPECT_EQ(after_pair({-EAGAIN, -EAGAIN, 0, kCap}), Next::WaitReadable);
}

TEST(AfterPair, SourceErrorsFailTheSource) {
    EXPECT_EQ(after_pair({-ECONNRESET, -EAGAIN, 0, kCap}), Next::SourceFailed);
    EXPECT_EQ(after_pair({-EIO, -EAGAIN, 0, kCap}), Next::SourceFailed);
}

TEST(AfterPair, DestinationErrorsWinOverEverything) {
    EXPECT_EQ(after_pair({5000, -EPIPE, 5000, kCap}), Next::DestFailed);
    EXPECT_EQ(after_pair({0, -ECONNRESET, 0, kCap}), Next::DestFailed);
    EXPECT_EQ(after_pair({-ECONNRESET, -EPIPE, 0, kCap}), Next::DestFailed);
}

TEST(AfterDrain, Outcomes) {
    EXPECT_EQ(after_drain(100, 0), Next::WaitReadable);
    EXPECT_EQ(after_drain(100, 50), Next::WaitWritable);
    EXPECT_EQ(after_drain(-EAGAIN, 50), Next::WaitWritable);
    EXPECT_EQ(after_drain(-EPIPE, 50), Next::DestFailed);
    EXPECT_EQ(after_drain(-ECONNRESET, 0), Next::DestFailed);
}
