// The queue of connections detached for a hand-over (engine/shard/handover/detached_queue.hpp)
// counts the fds its connections hold, two sockets each and two per pipe that goes
// along, as they are pushed and taken: the shards stop pausing on that count, which is
// what the fd limit did not count on.
#include "shard/handover/detached_queue.hpp"

#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

using namespace uringfwd;
using namespace uringfwd::engine;
using namespace std::chrono_literals;

namespace {

// A connection of two real sockets (a socketpair), with a real pipe per direction asked.
DetachedConnection detached(int pipes) {
    int pair[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
    DetachedConnection conn(pair[0], pair[1]);
    for (int i = 0; i < pipes; ++i) {
        int ends[2];
        EXPECT_EQ(::pipe(ends), 0);
        conn.hold_unsent(i == 0 ? Toward::Upstream : Toward::Client, {ends[0], ends[1], 0});
    }
    return conn;
}

TEST(DetachedQueue, CountsTheFdsOfWhatItHolds) {
    DetachedQueue queue;
    EXPECT_EQ(queue.fds(), 0u);
    queue.push(detached(0));
    queue.push(detached(2));
    queue.push(detached(1));
    EXPECT_EQ(queue.fds(), 2u + 6u + 4u);

    std::vector<DetachedConnection> first = queue.take(2, 0ms); // in the order pushed
    ASSERT_EQ(first.size(), 2u);
    EXPECT_EQ(first[0].fd_count(), 2u);
    EXPECT_EQ(first[1].fd_count(), 6u);
    EXPECT_EQ(queue.fds(), 4u);

    EXPECT_EQ(queue.take(10, 0ms).size(), 1u); // the third, and no more
    EXPECT_EQ(queue.fds(), 0u);
    EXPECT_TRUE(queue.take(10, 0ms).empty());
}

} // namespace
