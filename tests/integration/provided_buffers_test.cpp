// uring/: a receive with buffer selection takes a buffer from the provided-buffer ring
// only when data arrives, reports which one, fails with -ENOBUFS (leaving the data in
// the socket) when every buffer is out, and succeeds again once one is given back.
#include "uring/provided_buffers.hpp"
#include "uring/ring.hpp"

#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

namespace {

using uringfwd::uring::Completion;
using uringfwd::uring::ProvidedBuffers;
using uringfwd::uring::Ring;
using uringfwd::uring::RingError;

struct SocketPair {
    int fds[2] = {-1, -1};
    SocketPair() { EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0); }
    ~SocketPair() {
        ::close(fds[0]);
        ::close(fds[1]);
    }
};

// Submits one receive on fd and waits for its completion.
Completion receive(Ring& ring, int fd, uint16_t group) {
    ring.recv_provided(fd, group, 42);
    auto done = ring.submit_and_wait(1);
    EXPECT_EQ(done.size(), 1u);
    return done.empty() ? Completion{0, -EIO, 0} : done[0];
}

void send_text(int fd, const std::string& text) {
    ASSERT_EQ(::send(fd, text.data(), text.size(), 0), static_cast<ssize_t>(text.size()));
}

std::string text_of(const ProvidedBuffers& buffers, uint16_t id, int length) {
    return std::string(reinterpret_cast<const char*>(buffers.data(id)),
                       static_cast<std::size_t>(length));
}

TEST(ProvidedBuffers, ReceiveTakesABufferAndRunsOutWithEnobufs) {
    Ring ring(8);
    ProvidedBuffers buffers(ring, /*group=*/3, /*count=*/2, /*size=*/4096);
    SocketPair pair;

    send_text(pair.fds[1], "first");
    Completion a = receive(ring, pair.fds[0], 3);
    ASSERT_EQ(a.result, 5);
    ASSERT_TRUE(a.buffer().has_value());
    buffers.take(*a.buffer());
    EXPECT_EQ(text_of(buffers, *a.buffer(), a.result), "first");

    send_text(pair.fds[1], "second");
    Completion b = receive(ring, pair.fds[0], 3);
    ASSERT_EQ(b.result, 6);
    ASSERT_TRUE(b.buffer().has_value());
    buffers.take(*b.buffer());
    EXPECT_NE(*a.buffer(), *b.buffer());
    EXPECT_EQ(buffers.out(), 2u);

    // Both buffers are out: the receive fails and the data stays in the socket.
    send_text(pair.fds[1], "third");
    Completion c = receive(ring, pair.fds[0], 3);
    EXPECT_EQ(c.result, -ENOBUFS);
    EXPECT_FALSE(c.buffer().has_value());

    buffers.give_back(*a.buffer());
    EXPECT_EQ(buffers.out(), 1u);
    Completion d = receive(ring, pair.fds[0], 3);
    ASSERT_EQ(d.result, 5);
    ASSERT_TRUE(d.buffer().has_value());
    EXPECT_EQ(*d.buffer(), *a.buffer()); // the only one in the ring
    EXPECT_EQ(text_of(buffers, *d.buffer(), d.result), "third");
}

TEST(ProvidedBuffers, AWaitingReceiveHoldsNoBuffer) {
    Ring ring(8);
    ProvidedBuffers buffers(ring, 0, 1, 4096);
    SocketPair pair;

    // Nothing to read yet: the receive waits (io_uring's internal poll) without a buffer,
    // so a second socket can still take the only one.
    ring.recv_provided(pair.fds[0], 0, 1);
    EXPECT_TRUE(ring.submit_and_wait(0).empty());

    SocketPair other;
    send_text(other.fds[1], "x");
    Completion got = receive(ring, other.fds[0], 0);
    ASSERT_EQ(got.result, 1);
    ASSERT_TRUE(got.buffer().has_value());
}

// A receive bundle fills consecutive ring entries; after buffers came back out of
// order those hold ids that are not consecutive, and take_bundle() must name exactly
// the ones the kernel filled, in the order it filled them.
TEST(ProvidedBuffers, BundleTakesTheRingEntriesTheKernelFilledInOrder) {
    Ring ring(8);
    if (!ring.features().recvsend_bundle)
        GTEST_SKIP() << "the kernel has no receive bundles (IORING_FEAT_RECVSEND_BUNDLE, 6.10)";
    constexpr std::size_t kSize = 4096;
    ProvidedBuffers buffers(ring, /*group=*/5, /*count=*/4, kSize);
    SocketPair pair;

    // Take all four one by one, then give them back as 2, 0, 3, 1: the ring now
    // offers them in that order.
    uint16_t ids[4];
    for (int i = 0; i < 4; ++i) {
        send_text(pair.fds[1], "x");
        Completion c = receive(ring, pair.fds[0], 5);
        ASSERT_EQ(c.result, 1);
        ASSERT_TRUE(c.buffer().has_value());
        ids[i] = *c.buffer();
        buffers.take(ids[i]);
    }
    for (int i : {2, 0, 3, 1})
        buffers.give_back(ids[i]);
    ASSERT_EQ(buffers.out(), 0u);

    // 3 buffers' worth and a bit: a bundle takes four entries (the last one partly).
    std::string text(3 * kSize + 100, '\0');
    for (std::size_t i = 0; i < text.size(); ++i)
        text[i] = static_cast<char>('a' + i % 26);
    send_text(pair.fds[1], text);
    ring.recv_bundle(pair.fds[0], 5, 0, 7);
    auto done = ring.submit_and_wait(1);
    ASSERT_EQ(done.size(), 1u);
    const Completion& c = done[0];
    ASSERT_GT(c.result, 0);
    ASSERT_TRUE(c.buffer().has_value());
    EXPECT_EQ(*c.buffer(), ids[2]); // the ring's head
    uint16_t taken[4];
    std::size_t n = buffers.take_bundle(*c.buffer(), static_cast<std::size_t>(c.result), taken);
    ASSERT_EQ(n, (static_cast<std::size_t>(c.result) + kSize - 1) / kSize);
    const uint16_t expected[4] = {ids[2], ids[0], ids[3], ids[1]};
    std::string got;
    for (std::size_t i = 0; i < n; ++i) {
        EXPECT_EQ(taken[i], expected[i]) << "entry " << i;
        std::size_t length = std::min(kSize, static_cast<std::size_t>(c.result) - i * kSize);
        got += text_of(buffers, taken[i], static_cast<int>(length));
    }
    EXPECT_EQ(got, text.substr(0, static_cast<std::size_t>(c.result)));
    EXPECT_EQ(buffers.out(), n);
    // Taking the same entries twice is refused: they are no longer in the ring.
    uint16_t again[4];
    EXPECT_EQ(buffers.take_bundle(*c.buffer(), static_cast<std::size_t>(c.result), again), 0u);
    for (std::size_t i = 0; i < n; ++i)
        buffers.give_back(taken[i]);
    EXPECT_EQ(buffers.out(), 0u);
}

TEST(ProvidedBuffers, CountMustBeAPowerOfTwo) {
    Ring ring(8);
    EXPECT_THROW(ProvidedBuffers(ring, 0, 3, 4096), RingError);
    EXPECT_THROW(ProvidedBuffers(ring, 0, 0, 4096), RingError);
}

} // namespace
