// uring/: a link chain must reach the kernel in one submission. The kernel ends an
// unfinished chain at the end of every submit (io_submit_state_end() in
// io_uring/io_uring.c), so a chain split across two submits silently loses its link: a
// connect runs without its timeout (the lone LINK_TIMEOUT fails with -EINVAL; since
// 5.19 the connect itself completes with -EINPROGRESS) and a hard-linked splice pair
// runs as two unordered splices. Ring::reserve() keeps a chain
// whole when the submission queue is nearly full. Each test fills an 8-entry queue to
// exactly one free entry with polls that never complete, then prepares a chain of two.
#include "uring/ring.hpp"

#include "tests/support/deadline.hpp"
#include "tests/support/eventually.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/unique_fd.hpp"
#include "tests/support/watchdog.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <map>
#include <stdexcept>
#include <vector>

namespace {

using namespace std::chrono_literals;
using uringfwd::test::accept_one;
using uringfwd::test::connect_to;
using uringfwd::test::Deadline;
using uringfwd::test::eventually;
using uringfwd::test::Family;
using uringfwd::test::IoStatus;
using uringfwd::test::listen_loopback;
using uringfwd::test::Listener;
using uringfwd::test::UniqueFd;
using uringfwd::test::Watchdog;
using uringfwd::uring::Link;
using uringfwd::uring::Ring;

constexpr unsigned kRingEntries = 8;
constexpr uint64_t kFillerTag = 100; // kFillerTag + i for the i-th filler poll
constexpr uint64_t kCancelFillersTag = 200;
constexpr uint64_t kConnectTag = 1;
constexpr uint64_t kTimeoutTag = 2;
constexpr uint64_t kSpliceInTag = 3;
constexpr uint64_t kSpliceOutTag = 4;
// Long enough never to fire while the connect it guards completes on loopback.
constexpr auto kConnectTimeout = std::chrono::seconds{10};
// Every test finishes in well under a second; the watchdog ends a hung one.
constexpr auto kTestLimit = std::chrono::milliseconds{10'000};

// Submits and reaps until every tag in `tags` has completed; returns each result seen,
// by tag. Bounded by the test's Watchdog: submit_and_wait() blocks, and a completion
// that never comes is the failure.
std::map<uint64_t, int> wait_for(Ring& ring, const std::vector<uint64_t>& tags) {
    std::map<uint64_t, int> results;
    auto all_done = [&] {
        for (uint64_t tag : tags)
            if (!results.contains(tag))
                return false;
        return true;
    };
    while (!all_done()) {
        for (const auto& c : ring.submit_and_wait(1)) {
            EXPECT_FALSE(results.contains(c.user_data)) << "tag " << c.user_data << " twice";
            results[c.user_data] = c.result;
        }
    }
    return results;
}

// Prepares kRingEntries - 1 one-shot polls on an eventfd nobody writes: they stay
// pending until cancelled, so once submitted they hold no queue entry but, while
// prepared, leave exactly one free.
void fill_to_one_free(Ring& ring, int eventfd) {
    ASSERT_EQ(ring.features().sq_entries, kRingEntries);
    ASSERT_EQ(ring.prepared(), 0u);
    for (unsigned i = 0; i < kRingEntries - 1; ++i)
        ring.poll(eventfd, POLLIN, kFillerTag + i);
    ASSERT_EQ(ring.prepared(), kRingEntries - 1);
}

// Cancels the filler polls and checks that every one of them was still pending.
void cancel_fillers(Ring& ring, int eventfd) {
    ring.cancel_fd(eventfd, kCancelFillersTag);
    std::vector<uint64_t> tags{kCancelFillersTag};
    for (unsigned i = 0; i < kRingEntries - 1; ++i)
        tags.push_back(kFillerTag + i);
    auto results = wait_for(ring, tags);
    EXPECT_EQ(results[kCancelFillersTag], static_cast<int>(kRingEntries - 1));
    for (unsigned i = 0; i < kRingEntries - 1; ++i)
        EXPECT_EQ(results[kFillerTag + i], -ECANCELED) << "filler " << i;
}

UniqueFd make_eventfd() {
    UniqueFd fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    EXPECT_TRUE(fd.valid()) << "eventfd: " << std::strerror(errno);
    return fd;
}

sockaddr_in loopback_address(const Listener& listener) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(listener.endpoint().port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return addr;
}

// A non-blocking TCP socket, as the engine opens for its upstream connections.
UniqueFd nonblocking_tcp_socket() {
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    EXPECT_TRUE(fd.valid()) << "socket: " << std::strerror(errno);
    return fd;
}

void set_nonblocking(int fd) {
    int flags = ::fcntl(fd, F_GETFL);
    ASSERT_GE(flags, 0);
    ASSERT_EQ(::fcntl(fd, F_SETFL, flags | O_NONBLOCK), 0);
}

// Waits until `fd` has exactly `bytes` queued to read.
void wait_readable_bytes(int fd, int bytes, const Deadline& deadline) {
    int queued = 0;
    eventually([&] { return ::ioctl(fd, FIONREAD, &queued) != 0 || queued >= bytes; }, deadline,
               1ms);
    ASSERT_EQ(::ioctl(fd, FIONREAD, &queued), 0);
    ASSERT_EQ(queued, bytes);
}

bool kernel_at_least(int major, int minor) {
    utsname name{};
    if (::uname(&name) != 0)
        return false;
    int have_major = 0;
    int have_minor = 0;
    if (std::sscanf(name.release, "%d.%d", &have_major, &have_minor) != 2)
        return false;
    return have_major > major || (have_major == major && have_minor >= minor);
}

TEST(RingChain, ReserveWithRoomSubmitsNothing) {
    Watchdog watchdog(kTestLimit, "RingChain.ReserveWithRoomSubmitsNothing");
    Ring ring(kRingEntries);
    UniqueFd efd = make_eventfd();
    ring.poll(efd.get(), POLLIN, kFillerTag);
    uint64_t enters = ring.counters().enters;

    ring.reserve(kRingEntries - 1); // exactly the room left
    EXPECT_EQ(ring.counters().enters, enters);
    EXPECT_EQ(ring.prepared(), 1u);

    ring.cancel(kFillerTag, kCancelFillersTag);
    auto results = wait_for(ring, {kFillerTag, kCancelFillersTag});
    EXPECT_EQ(results[kFillerTag], -ECANCELED);
    EXPECT_EQ(results[kCancelFillersTag], 0);
}

TEST(RingChain, ReserveLongerThanTheQueueThrows) {
    Ring ring(kRingEntries);
    EXPECT_NO_THROW(ring.reserve(kRingEntries));
    EXPECT_THROW(ring.reserve(kRingEntries + 1), std::logic_error);
    EXPECT_EQ(ring.prepared(), 0u);
}

// The chain the engine prepares for every upstream connect.
TEST(RingChain, ReservedConnectKeepsItsTimeout) {
    Watchdog watchdog(kTestLimit, "RingChain.ReservedConnectKeepsItsTimeout");
    Ring ring(kRingEntries);
    UniqueFd efd = make_eventfd();
    Listener listener = listen_loopback(Family::Inet4);
    sockaddr_in addr = loopback_address(listener);
    UniqueFd fd = nonblocking_tcp_socket();

    ASSERT_NO_FATAL_FAILURE(fill_to_one_free(ring, efd.get()));
    uint64_t enters = ring.counters().enters;
    ring.reserve(2);
    // One free entry is too few: the fillers went to the kernel, and the whole queue is
    // free for the chain.
    EXPECT_EQ(ring.counters().enters, enters + 1);
    EXPECT_EQ(ring.prepared(), 0u);

    ring.connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr), kConnectTag,
                 Link::Soft);
    ring.link_timeout(kConnectTimeout, kTimeoutTag);
    EXPECT_EQ(ring.prepared(), 2u); // both wait for the same submission
    EXPECT_EQ(ring.counters().enters, enters + 1);

    auto results = wait_for(ring, {kConnectTag, kTimeoutTag});
    EXPECT_EQ(results[kConnectTag], 0);
    // The connect finished first and cancelled its timeout; -EINVAL would mean the
    // timeout reached the kernel without its connect.
    EXPECT_EQ(results[kTimeoutTag], -ECANCELED);
    UniqueFd accepted = accept_one(listener.fd(), Deadline(5s));
    EXPECT_TRUE(accepted.valid());

    cancel_fillers(ring, efd.get());
}

// The chain the engine prepares to move data: socket -> pipe, hard-linked to
// pipe -> socket.
TEST(RingChain, ReservedSplicePairStaysLinked) {
    Watchdog watchdog(kTestLimit, "RingChain.ReservedSplicePairStaysLinked");
    constexpr int kBytes = 1000;
    constexpr unsigned kPipeCapacity = 64 * 1024; // the default pipe size
    Deadline deadline(5s);

    Ring ring(kRingEntries);
    UniqueFd efd = make_eventfd();
    // writer -> src, and dst -> reader: two loopback TCP connections.
    Listener listener = listen_loopback(Family::Inet4);
    UniqueFd writer = connect_to(listener.endpoint());
    UniqueFd src = accept_one(listener.fd(), deadline);
    UniqueFd dst = connect_to(listener.endpoint());
    UniqueFd reader = accept_one(listener.fd(), deadline);
    ASSERT_NO_FATAL_FAILURE(set_nonblocking(src.get()));
    ASSERT_NO_FATAL_FAILURE(set_nonblocking(dst.get()));
    std::array<int, 2> pipe_fds{-1, -1};
    ASSERT_EQ(::pipe2(pipe_fds.data(), O_NONBLOCK | O_CLOEXEC), 0);
    UniqueFd pipe_read(pipe_fds[0]);
    UniqueFd pipe_write(pipe_fds[1]);

    std::vector<std::byte> sent(kBytes);
    for (int i = 0; i < kBytes; ++i)
        sent[static_cast<std::size_t>(i)] = static_cast<std::byte>((i * 7 + 3) % 251);
    ASSERT_EQ(uringfwd::test::send_all(writer.get(), sent, deadline).status, IoStatus::Ok);
    ASSERT_NO_FATAL_FAILURE(wait_readable_bytes(src.get(), kBytes, deadline));

    ASSERT_NO_FATAL_FAILURE(fill_to_one_free(ring, efd.get()));
    uint64_t enters = ring.counters().enters;
    ring.reserve(2);
    EXPECT_EQ(ring.counters().enters, enters + 1);
    EXPECT_EQ(ring.prepared(), 0u);

    ring.splice(src.get(), pipe_write.get(), kPipeCapacity, SPLICE_F_NONBLOCK, kSpliceInTag,
                Link::Hard);
    ring.splice(pipe_read.get(), dst.get(), kPipeCapacity, SPLICE_F_NONBLOCK, kSpliceOutTag);
    EXPECT_EQ(ring.prepared(), 2u);
    EXPECT_EQ(ring.counters().enters, enters + 1);

    auto results = wait_for(ring, {kSpliceInTag, kSpliceOutTag});
    EXPECT_EQ(results[kSpliceInTag], kBytes);
    // Split, the second splice could run before the first and find the pipe empty
    // (-EAGAIN); linked, it runs after and moves everything the first put in.
    EXPECT_EQ(results[kSpliceOutTag], kBytes);

    std::vector<std::byte> received(kBytes);
    ASSERT_EQ(uringfwd::test::recv_all(reader.get(), received, deadline).status, IoStatus::Ok);
    EXPECT_EQ(received, sent);

    cancel_fillers(ring, efd.get());
}

// The negative control: the same connect chain without reserve() is split by the full
// queue, which shows the tests above can fail. next_sqe() submits the fillers and the
// connect when the link timeout finds no free entry; io_submit_state_end() queues the
// connect as an unfinished chain of one, and the timeout arrives alone in the next
// submission, where __io_timeout_prep() (io_uring/timeout.c) rejects a LINK_TIMEOUT
// with no chain to attach to: -EINVAL on every kernel with IORING_OP_LINK_TIMEOUT, and
// the prepared() counts show the split on any kernel. What the stranded connect
// returns depends on the kernel: since 5.19 ("io_uring: shrink final link flush")
// io_submit_state_end() hands it to io_queue_sqe_fallback(), i.e. to an io-wq worker,
// which issues it blocking (io_wq_submit_work() adds IO_URING_F_NONBLOCK only to
// requests forced async, e.g. by IOSQE_ASYNC), so connect(2) on the non-blocking socket
// answers -EINPROGRESS as the result. Earlier kernels issued it inline, where
// -EINPROGRESS arms a poll instead.
TEST(RingChain, UnreservedConnectLosesItsTimeout) {
    Watchdog watchdog(kTestLimit, "RingChain.UnreservedConnectLosesItsTimeout");
    Ring ring(kRingEntries);
    UniqueFd efd = make_eventfd();
    Listener listener = listen_loopback(Family::Inet4);
    sockaddr_in addr = loopback_address(listener);
    UniqueFd fd = nonblocking_tcp_socket();

    ASSERT_NO_FATAL_FAILURE(fill_to_one_free(ring, efd.get()));
    uint64_t enters = ring.counters().enters;
    ring.connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr), kConnectTag,
                 Link::Soft);
    EXPECT_EQ(ring.prepared(), kRingEntries); // the queue is full
    ring.link_timeout(kConnectTimeout, kTimeoutTag);
    // The connect went to the kernel with the fillers; only the timeout is left.
    EXPECT_EQ(ring.counters().enters, enters + 1);
    EXPECT_EQ(ring.prepared(), 1u);

    auto results = wait_for(ring, {kConnectTag, kTimeoutTag});
    EXPECT_EQ(results[kTimeoutTag], -EINVAL);
    // The connect ran with no timeout guarding it, and failed for its caller although
    // the handshake goes on in the kernel (the listener accepts it below).
    if (kernel_at_least(5, 19)) {
        EXPECT_EQ(results[kConnectTag], -EINPROGRESS);
    }
    UniqueFd accepted = accept_one(listener.fd(), Deadline(5s));
    EXPECT_TRUE(accepted.valid());

    cancel_fillers(ring, efd.get());
}

} // namespace
