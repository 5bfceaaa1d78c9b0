// The pipe pool with real pipes: bounds, reuse only when empty, sizes.
#include "pipes/pipe_pool.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

using uringfwd::pipes::Pipe;
using uringfwd::pipes::PipePool;

namespace {
bool fd_open(int fd) {
    return ::fcntl(fd, F_GETFD) != -1;
}
} // namespace

TEST(PipePool, LeasesUpToTheBoundThenSaysNo) {
    PipePool pool(2, 64 * 1024);
    auto a = pool.lease();
    auto b = pool.lease();
    ASSERT_TRUE(a && b);
    EXPECT_FALSE(pool.lease());
    EXPECT_EQ(pool.counters().leased_now, 2u);
    pool.give_back(std::move(*a));
    EXPECT_TRUE(pool.lease());
}

TEST(PipePool, PipesAreNonBlockingAndSized) {
    PipePool pool(1, 256 * 1024);
    auto p = pool.lease();
    ASSERT_TRUE(p);
    EXPECT_EQ(p->capacity(), 256u * 1024);
    EXPECT_EQ(::fcntl(p->write_fd(), F_GETPIPE_SZ), 256 * 1024);
    EXPECT_TRUE(::fcntl(p->read_fd(), F_GETFL) & O_NONBLOCK);
    EXPECT_TRUE(::fcntl(p->write_fd(), F_GETFL) & O_NONBLOCK);
    EXPECT_TRUE(::fcntl(p->read_fd(), F_GETFD) & FD_CLOEXEC);
}

TEST(PipePool, AnEmptyPipeIsReused) {
    PipePool pool(4, 64 * 1024);
    auto p = pool.lease();
    ASSERT_TRUE(p);
    int fd = p->read_fd();
    pool.give_back(std::move(*p));
    auto again = pool.lease();
    ASSERT_TRUE(again);
    EXPECT_EQ(again->read_fd(), fd);
    EXPECT_EQ(pool.counters().created, 1u);
}

TEST(PipePool, APipeHoldingBytesIsClosedNeverReused) {
    PipePool pool(4, 64 * 1024);
    auto p = pool.lease();
    ASSERT_TRUE(p);
    ASSERT_EQ(::write(p->write_fd(), "abc", 3), 3);
    p->filled(3);
    int rfd = p->read_fd();
    pool.give_back(std::move(*p));
    EXPECT_EQ(pool.counters().closed_dirty, 1u);
    EXPECT_EQ(pool.idle(), 0u);
    EXPECT_FALSE(fd_open(rfd));
}

TEST(PipePool, AskingTheKernelCatchesAWrongCounter) {
    PipePool pool(4, 64 * 1024);
    auto p = pool.lease();
    ASSERT_TRUE(p);
    ASSERT_EQ(::write(p->write_fd(), "x", 1), 1); // counter not told
    pool.give_back(std::move(*p), PipePool::Check::AskKernel);
    EXPECT_EQ(pool.counters().closed_dirty, 1u);
    EXPECT_EQ(pool.idle(), 0u);
}

TEST(PipePool, AskingForMoreThanTheSystemMaximumShrinksOnce) {
    // Above fs.pipe-max-size F_SETPIPE_SZ needs CAP_SYS_RESOURCE. Without it the pool
    // halves its request until the kernel agrees and says so once.
    std::size_t max = uringfwd::pipes::system_pipe_max_size();
    PipePool pool(2, max * 4);
    auto p = pool.lease();
    ASSERT_TRUE(p);
    if (pool.counters().size_reductions == 0)
        GTEST_SKIP() << "this process may exceed fs.pipe-max-size (CAP_SYS_RESOURCE)";
    EXPECT_EQ(p->capacity(), max);
    EXPECT_EQ(pool.pipe_size(), max);
    EXPECT_EQ(pool.take_notices().size(), 1u);
    auto q = pool.lease();
    ASSERT_TRUE(q);
    EXPECT_TRUE(pool.take_notices().empty());
}

TEST(PipePool, APipeLetGoKeepsItsBytesAndLeavesTheBound) {
    PipePool from(1, 64 * 1024);
    PipePool to(1, 64 * 1024);
    auto p = from.lease();
    ASSERT_TRUE(p);
    ASSERT_EQ(::write(p->write_fd(), "abc", 3), 3);
    p->filled(3);
    Pipe moving = from.let_go(std::move(*p));
    EXPECT_EQ(from.counters().leased_now, 0u);
    EXPECT_TRUE(from.lease()) << "the pipe that left no longer counts";
    EXPECT_EQ(moving.bytes(), 3u);

    auto own = to.lease(); // `to` is full now; the adopted pipe comes in above its bound
    ASSERT_TRUE(own);
    to.adopt();
    EXPECT_EQ(to.counters().leased_now, 2u);
    char buf[3];
    ASSERT_EQ(::read(moving.read_fd(), buf, 3), 3);
    moving.drained(3);
    const int adopted_fd = moving.read_fd();
    to.give_back(std::move(moving));
    EXPECT_FALSE(fd_open(adopted_fd)) << "kept above the bound";
    to.give_back(std::move(*own));
    EXPECT_EQ(to.idle(), 1u);
}

TEST(PipePool, ReleaseGivesUpBothEndsOpen) {
    PipePool pool(1, 64 * 1024);
    auto p = pool.lease();
    ASSERT_TRUE(p);
    const Pipe::Ends ends = p->release();
    EXPECT_LT(p->read_fd(), 0);
    EXPECT_TRUE(fd_open(ends.read_fd));
    EXPECT_TRUE(fd_open(ends.write_fd));
    p.reset();
    EXPECT_TRUE(fd_open(ends.read_fd)) << "not closed with the object";
    ::close(ends.read_fd);
    ::close(ends.write_fd);
}
