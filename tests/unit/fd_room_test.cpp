// The connections the fd limit leaves room for: two fds each, after pipes and what the
// rest of the process keeps; a file table's room in connections per shard.
#include "platform/fd_room.hpp"

#include <gtest/gtest.h>

using namespace uringfwd::engine;

TEST(FdRoom, TwoFdsPerConnectionAfterPipesAndTheRest) {
    FdRoomInput in;
    in.fd_limit = 1 << 20;
    in.open_fds = 10;
    in.shards = 2;
    in.listeners = 1;
    in.max_pipes = 128;
    const FdRoom room = fd_room(in);
    EXPECT_EQ(room.pipes_per_shard, 128u); // plenty of fds: as configured
    EXPECT_EQ(room.reserved, 10u + 2 * 3 + kSpareFds);
    EXPECT_EQ(room.connections, ((1u << 20) - room.reserved - 2 * 2 * 128) / 2);
}

TEST(FdRoom, FewFdsGetFewerPipesAndStillRoomForConnections) {
    FdRoomInput in;
    in.fd_limit = 64; // prlimit --nofile=64:64
    in.open_fds = 5;
    in.shards = 2;
    in.listeners = 1;
    in.max_pipes = 128;
    const FdRoom room = fd_room(in);
    const uint64_t free = 64 - (5 + 2 * 3 + kSpareFds); // 37
    EXPECT_EQ(room.pipes_per_shard, 1u);                // a fifth of 37 holds 1 each
    EXPECT_EQ(room.connections, (free - 2 * 2) / 2);    // 16
    EXPECT_GT(room.connections, 0u);
}

// Only for connections that leave their shard with copy chunks (a hand-over, a move).
TEST(FdRoom, TheCopyPathNeedsOnlyAFewPipes) {
    FdRoomInput in;
    in.fd_limit = 1000;
    in.open_fds = 5;
    in.shards = 1;
    in.listeners = 1;
    in.max_pipes = 128;
    in.uses_pipes = false;
    const FdRoom room = fd_room(in);
    EXPECT_EQ(room.pipes_per_shard, kCopyPathPipes);
    EXPECT_EQ(room.connections, (1000 - (5 + 3 + kSpareFds) - 2 * kCopyPathPipes) / 2);
    in.max_pipes = 1;
    EXPECT_EQ(fd_room(in).pipes_per_shard, 1u) << "never more than max_pipes";
}

TEST(FdRoom, NoRoomWhenTheRestTakesEverything) {
    FdRoomInput in;
    in.fd_limit = 20;
    in.open_fds = 5;
    in.shards = 2;
    in.listeners = 2;
    in.health_targets = 3;
    in.max_pipes = 128;
    const FdRoom room = fd_room(in);
    EXPECT_EQ(room.connections, 0u);
    EXPECT_EQ(room.reserved, 5u + 2 * 4 + 3 + 2 + kSpareFds);
}

TEST(SlotRoom, TwoSlotsPerConnectionLessTheAcceptsInFlight) {
    EXPECT_EQ(slot_room(20000, 1), 10000u); // one listener: the table fills exactly
    EXPECT_EQ(slot_room(20000, 3), 9998u);
    EXPECT_EQ(slot_room(64, 0), 32u);
    EXPECT_EQ(slot_room(1, 1), 0u);
}
