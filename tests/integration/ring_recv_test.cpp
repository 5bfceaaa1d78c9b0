// uring/: Ring::recv() and a send or receive soft-linked to a LINK_TIMEOUT, the chain the
// health checker bounds each step of a check with. A receive on an empty socket arms
// io_uring's internal poll (docs/kernel.md §8), so only the linked timeout ends it.
#include "uring/ring.hpp"

#include "tests/support/deadline.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/unique_fd.hpp"
#include "tests/support/watchdog.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

using namespace std::chrono_literals;
using uringfwd::test::accept_one;
using uringfwd::test::connect_to;
using uringfwd::test::Deadline;
using uringfwd::test::Family;
using uringfwd::test::IoStatus;
using uringfwd::test::listen_loopback;
using uringfwd::test::Listener;
using uringfwd::test::UniqueFd;
using uringfwd::test::Watchdog;
using uringfwd::uring::Link;
using uringfwd::uring::Ring;

constexpr unsigned kRingEntries = 8;
constexpr uint64_t kOpTag = 1;
constexpr uint64_t kTimeoutTag = 2;
constexpr auto kTestLimit = std::chrono::milliseconds{10'000};

// Submits and reaps until every tag in `tags` has completed; returns each result by
// tag. Bounded by the test's Watchdog.
std::map<uint64_t, int> wait_for(Ring& ring, const std::vector<uint64_t>& tags) {
    std::map<uint64_t, int> results;
    auto all_done = [&] {
        for (uint64_t tag : tags)
            if (!results.contains(tag))
                return false;
        return true;
    };
    while (!all_done()) {
        for (const auto& c : ring.submit_and_wait(1))
            results[c.user_data] = c.result;
    }
    return results;
}

// A connected loopback TCP pair: `ring_side` is non-blocking, as every socket the
// engine hands to its ring; `peer` is blocking, for the test's own helpers.
struct Pair {
    UniqueFd ring_side;
    UniqueFd peer;
};

Pair connected_pair() {
    Listener listener = listen_loopback(Family::Inet4);
    Pair pair;
    pair.ring_side = connect_to(listener.endpoint());
    pair.peer = accept_one(listener.fd(), Deadline(5s));
    int flags = ::fcntl(pair.ring_side.get(), F_GETFL);
    EXPECT_EQ(::fcntl(pair.ring_side.get(), F_SETFL, flags | O_NONBLOCK), 0);
    return pair;
}

TEST(RingRecv, ReceivesWhatWasSent) {
    Watchdog watchdog(kTestLimit, "RingRecv.ReceivesWhatWasSent");
    Ring ring(kRingEntries);
    Pair pair = connected_pair();
    ASSERT_EQ(uringfwd::test::send_text(pair.peer.get(), "hello", Deadline(5s)).status,
              IoStatus::Ok);

    std::array<char, 16> buf{};
    ring.recv(pair.ring_side.get(), buf.data(), buf.size(), 0, kOpTag);
    auto results = wait_for(ring, {kOpTag});
    ASSERT_EQ(results[kOpTag], 5);
    EXPECT_EQ(std::string(buf.data(), 5), "hello");
}

TEST(RingRecv, ReturnsZeroAtEndOfStream) {
    Watchdog watchdog(kTestLimit, "RingRecv.ReturnsZeroAtEndOfStream");
    Ring ring(kRingEntries);
    Pair pair = connected_pair();
    uringfwd::test::shutdown_write(pair.peer.get());

    std::array<char, 16> buf{};
    ring.recv(pair.ring_side.get(), buf.data(), buf.size(), 0, kOpTag);
    EXPECT_EQ(wait_for(ring, {kOpTag})[kOpTag], 0);
}

// Nothing ever arrives: the linked timeout cancels the receive.
TEST(RingRecv, LinkedTimeoutEndsAnIdleReceive) {
    Watchdog watchdog(kTestLimit, "RingRecv.LinkedTimeoutEndsAnIdleReceive");
    constexpr auto kTimeout = 50ms;
    Ring ring(kRingEntries);
    Pair pair = connected_pair();

    std::array<char, 16> buf{};
    auto start = std::chrono::steady_clock::now();
    ring.reserve(2);
    ring.recv(pair.ring_side.get(), buf.data(), buf.size(), 0, kOpTag, Link::Soft);
    ring.link_timeout(kTimeout, kTimeoutTag);
    auto results = wait_for(ring, {kOpTag, kTimeoutTag});
    auto elapsed = std::chrono::steady_clock::now() - start;

    EXPECT_EQ(results[kOpTag], -ECANCELED);
    EXPECT_EQ(results[kTimeoutTag], -ETIME);
    EXPECT_GE(elapsed, kTimeout);
}

// Data arrives first: the receive completes and its timeout is cancelled.
TEST(RingRecv, LinkedReceiveCancelsItsTimeout) {
    Watchdog watchdog(kTestLimit, "RingRecv.LinkedReceiveCancelsItsTimeout");
    Ring ring(kRingEntries);
    Pair pair = connected_pair();
    ASSERT_EQ(uringfwd::test::send_text(pair.peer.get(), "+PONG\r\n", Deadline(5s)).status,
              IoStatus::Ok);

    std::array<char, 16> buf{};
    ring.reserve(2);
    ring.recv(pair.ring_side.get(), buf.data(), buf.size(), 0, kOpTag, Link::Soft);
    ring.link_timeout(10s, kTimeoutTag);
    auto results = wait_for(ring, {kOpTag, kTimeoutTag});
    EXPECT_EQ(results[kOpTag], 7);
    EXPECT_EQ(results[kTimeoutTag], -ECANCELED);
}

TEST(RingRecv, LinkedSendCancelsItsTimeout) {
    Watchdog watchdog(kTestLimit, "RingRecv.LinkedSendCancelsItsTimeout");
    Ring ring(kRingEntries);
    Pair pair = connected_pair();

    const std::string ping = "PING\r\n";
    ring.reserve(2);
    ring.send(pair.ring_side.get(), ping.data(), ping.size(), MSG_NOSIGNAL, kOpTag, Link::Soft);
    ring.link_timeout(10s, kTimeoutTag);
    auto results = wait_for(ring, {kOpTag, kTimeoutTag});
    EXPECT_EQ(results[kOpTag], static_cast<int>(ping.size()));
    EXPECT_EQ(results[kTimeoutTag], -ECANCELED);

    std::array<std::byte, 6> got{};
    ASSERT_EQ(uringfwd::test::recv_all(pair.peer.get(), got, Deadline(5s)).status, IoStatus::Ok);
    EXPECT_EQ(std::memcmp(got.data(), ping.data(), ping.size()), 0);
}

} // namespace
