// What IORING_OP_SPLICE does with a TCP source that is blocking or not, on the running
// kernel: the facts the parked bulk splice (EngineConfig::Experimental::bulk_park, docs/kernel.md
// §1.8) rests on. Each test is a probe written as an assertion, so a kernel that
// changes any of it fails here before it misleads the engine.
//
// - An O_NONBLOCK source answers -EAGAIN at once whatever SO_RCVTIMEO says:
//   net/ipv4/tcp.c tcp_splice_read takes its wait from sock_rcvtimeo(sk, the file's
//   O_NONBLOCK), which is 0 for a non-blocking file; SPLICE_F_NONBLOCK plays no part.
// - A blocking source parks the io-wq worker in sk_wait_data for up to SO_RCVTIMEO and
//   then answers -EAGAIN (the `!timeo` check of the same loop).
// - Data arriving meanwhile wakes that worker directly; the splice returns what it found.
// - A cancel reaches the parked worker (io_uring/io-wq.c io_wq_worker_cancel sets a
//   notify signal) and the splice ends with -EINTR (sock_intr_errno: a finite timeout)
//   or -ERESTARTSYS (no timeout), at once rather than when the timeout runs out.
#include "uring/ring.hpp"

#include "tests/support/deadline.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/unique_fd.hpp"
#include "tests/support/watchdog.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using uringfwd::test::accept_one;
using uringfwd::test::connect_to;
using uringfwd::test::Deadline;
using uringfwd::test::Family;
using uringfwd::test::listen_loopback;
using uringfwd::test::UniqueFd;
using uringfwd::test::Watchdog;
using uringfwd::uring::Ring;

constexpr uint64_t kSpliceTag = 1;
constexpr uint64_t kCancelTag = 2;
constexpr unsigned kLen = 65536;
constexpr auto kTestLimit = 10s;
constexpr int kErestartsys = 512; // kernel-internal, but it reaches the CQE (§1.6)

struct Pair {
    UniqueFd sender;   // the peer that writes
    UniqueFd receiver; // the splice's source
    UniqueFd pipe_read;
    UniqueFd pipe_write;
};

// A loopback TCP connection and an O_NONBLOCK pipe, as the engine has them; the
// receiver is blocking unless `nonblocking`, with SO_RCVTIMEO `timeout` (0 = none).
Pair make_pair(bool nonblocking, std::chrono::milliseconds timeout) {
    auto listener = listen_loopback(Family::Inet4);
    Pair p;
    p.sender = connect_to(listener.endpoint());
    p.receiver = accept_one(listener.fd(), Deadline(5s));
    int flags = ::fcntl(p.receiver.get(), F_GETFL);
    ::fcntl(p.receiver.get(), F_SETFL, nonblocking ? flags | O_NONBLOCK : flags & ~O_NONBLOCK);
    timeval tv{static_cast<time_t>(timeout.count() / 1000),
               static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
    EXPECT_EQ(::setsockopt(p.receiver.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
    int fds[2];
    EXPECT_EQ(::pipe2(fds, O_NONBLOCK | O_CLOEXEC), 0);
    p.pipe_read = UniqueFd(fds[0]);
    p.pipe_write = UniqueFd(fds[1]);
    return p;
}

// Submits and reaps until every tag has completed.
std::map<uint64_t, int> wait_for(Ring& ring, const std::vector<uint64_t>& tags) {
    std::map<uint64_t, int> results;
    while (results.size() < tags.size())
        for (const auto& c : ring.submit_and_wait(1))
            results[c.user_data] = c.result;
    return results;
}

std::chrono::milliseconds since(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t);
}

TEST(SpliceParkProbe, NonBlockingSourceAnswersAtOnceWhateverTheTimeout) {
    Watchdog watchdog(kTestLimit, "SpliceParkProbe.NonBlockingSourceAnswersAtOnce");
    Pair p = make_pair(/*nonblocking=*/true, 2000ms);
    Ring ring(8);
    auto start = Clock::now();
    ring.splice(p.receiver.get(), p.pipe_write.get(), kLen, 0, kSpliceTag);
    EXPECT_EQ(wait_for(ring, {kSpliceTag})[kSpliceTag], -EAGAIN);
    EXPECT_LT(since(start), 1000ms) << "the 2 s SO_RCVTIMEO must play no part";
}

TEST(SpliceParkProbe, BlockingSourceParksUntilTheReceiveTimeout) {
    Watchdog watchdog(kTestLimit, "SpliceParkProbe.BlockingSourceParksUntilTheReceiveTimeout");
    Pair p = make_pair(/*nonblocking=*/false, 100ms);
    Ring ring(8);
    auto start = Clock::now();
    // SPLICE_F_NONBLOCK as the engine passes it: the TCP source ignores it (§2.1).
    ring.splice(p.receiver.get(), p.pipe_write.get(), kLen, SPLICE_F_NONBLOCK, kSpliceTag);
    EXPECT_EQ(wait_for(ring, {kSpliceTag})[kSpliceTag], -EAGAIN);
    EXPECT_GE(since(start), 90ms) << "returned before the timeout: the worker did not park";
}

TEST(SpliceParkProbe, DataWakesTheParkedWorker) {
    Watchdog watchdog(kTestLimit, "SpliceParkProbe.DataWakesTheParkedWorker");
    Pair p = make_pair(/*nonblocking=*/false, 5000ms);
    Ring ring(8);
    ring.splice(p.receiver.get(), p.pipe_write.get(), kLen, SPLICE_F_NONBLOCK, kSpliceTag);
    ring.submit_and_wait(0);
    std::this_thread::sleep_for(50ms); // the worker is asleep in sk_wait_data by now
    auto start = Clock::now();
    char data[1000] = {};
    ASSERT_EQ(::send(p.sender.get(), data, sizeof(data), 0), 1000);
    EXPECT_EQ(wait_for(ring, {kSpliceTag})[kSpliceTag], 1000);
    EXPECT_LT(since(start), 2000ms);
}

// With and without a receive timeout: the errno differs, the promptness does not.
void cancel_parked(std::chrono::milliseconds timeout, int expected) {
    Pair p = make_pair(/*nonblocking=*/false, timeout);
    Ring ring(8);
    ring.splice(p.receiver.get(), p.pipe_write.get(), kLen, SPLICE_F_NONBLOCK, kSpliceTag);
    ring.submit_and_wait(0);
    std::this_thread::sleep_for(50ms);
    auto start = Clock::now();
    ring.cancel(kSpliceTag, kCancelTag);
    auto results = wait_for(ring, {kSpliceTag, kCancelTag});
    EXPECT_EQ(results[kSpliceTag], expected) << std::strerror(-results[kSpliceTag]);
    // A running request cannot be taken back, only interrupted (§1.6).
    EXPECT_EQ(results[kCancelTag], -EALREADY);
    EXPECT_LT(since(start), 1000ms) << "the cancel waited for the timeout";
}

TEST(SpliceParkProbe, CancelInterruptsAParkedSpliceAtOnce) {
    Watchdog watchdog(kTestLimit, "SpliceParkProbe.CancelInterruptsAParkedSpliceAtOnce");
    cancel_parked(5000ms, -EINTR);
    cancel_parked(0ms, -kErestartsys);
}

TEST(SpliceParkProbe, ShutdownOfTheSourceEndsAParkedSplice) {
    Watchdog watchdog(kTestLimit, "SpliceParkProbe.ShutdownOfTheSourceEndsAParkedSplice");
    Pair p = make_pair(/*nonblocking=*/false, 5000ms);
    Ring ring(8);
    ring.splice(p.receiver.get(), p.pipe_write.get(), kLen, SPLICE_F_NONBLOCK, kSpliceTag);
    ring.submit_and_wait(0);
    std::this_thread::sleep_for(50ms);
    auto start = Clock::now();
    ASSERT_EQ(::shutdown(p.sender.get(), SHUT_WR), 0); // the peer's FIN
    EXPECT_EQ(wait_for(ring, {kSpliceTag})[kSpliceTag], 0);
    EXPECT_LT(since(start), 2000ms);
}

} // namespace
