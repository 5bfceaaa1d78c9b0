// Isolation proof: with one pipe per shard, hundreds of connections take turns on the
// same pipe, and a third of them die (RST) while that pipe still holds their bytes. The
// engine must close such a dirty pipe rather than reuse it: every connection that
// completes receives exactly its own stream back, checked word by word. The same with
// the copy path's buffers, two per shard, and with both on the auto path.
#include "tests/hardening/stamped_stream.hpp"
#include "tests/support/echo_server.hpp"
#include "tests/support/proxy_under_test.hpp"
#include "tests/support/sockets.hpp"

#include <gtest/gtest.h>

#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fmt/core.h>
#include <mutex>
#include <thread>
#include <vector>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

constexpr int kLanes = 3;                // connections running at the same time
constexpr int kPerLane = 100;            // sequential connections per lane
constexpr uint64_t kBytes = 256 * 1024;  // each completed connection's stream
constexpr uint64_t kAbortPush = 4 << 20; // what an aborting connection tries to send

struct Outcome {
    bool ok = false;
    std::string error;
};

// Sends connection `id`'s stream through the proxy and reads the echo at the same time,
// verifying every word; FIN after the last byte, done at EOF. An aborting connection
// pushes without reading, so the echo piles up in the proxy, then resets.
Outcome run_connection(const Endpoint& proxy, uint32_t id, bool abort) {
    UniqueFd fd = connect_to(proxy);
    const uint64_t total = abort ? kAbortPush : kBytes;
    std::vector<std::byte> out(64 * 1024);
    std::vector<std::byte> in(64 * 1024);
    StampedVerifier verifier{id};
    uint64_t sent = 0;
    bool fin_sent = false;
    const Deadline deadline{abort ? milliseconds{300} : milliseconds{15000}};
    while (!deadline.expired()) {
        pollfd p{fd.get(), static_cast<short>((abort ? 0 : POLLIN) | (fin_sent ? 0 : POLLOUT)), 0};
        if (::poll(&p, 1, std::min(deadline.poll_timeout_ms(), 100)) <= 0) {
            continue;
        }
        if (p.revents & POLLIN) {
            const ssize_t n = ::recv(fd.get(), in.data(), in.size(), MSG_DONTWAIT);
            if (n == 0) {
                if (verifier.received() != kBytes) {
                    return {false, fmt::format("connection {}: EOF after {} of {} bytes", id,
                                               verifier.received(), kBytes)};
                }
                return {true, {}};
            }
            if (n < 0 && errno != EAGAIN) {
                return {false, fmt::format("connection {}: recv: {}", id, std::strerror(errno))};
            }
            if (n > 0 && !verifier.feed(std::span(in.data(), static_cast<std::size_t>(n)))) {
                return {false, verifier.error()};
            }
        }
        if ((p.revents & POLLOUT) && !fin_sent) {
            const std::size_t want = std::min<uint64_t>(out.size(), total - sent);
            fill_stamped(id, sent, std::span(out.data(), want));
            const ssize_t n = ::send(fd.get(), out.data(), want, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (n > 0) {
                sent += static_cast<uint64_t>(n);
            }
            if (sent == total && !abort) {
                shutdown_write(fd.get());
                fin_sent = true;
            }
        }
    }
    if (abort) {
        abortive_close(fd);
        return {true, {}};
    }
    return {false,
            fmt::format("connection {}: timed out after {} bytes back", id, verifier.received())};
}

struct LanesResult {
    std::vector<std::string> failures;
    int completed = 0;
    int aborted = 0;
    EngineStats stats;
};

// kLanes threads, each running kPerLane connections one after another through `proxy`.
LanesResult run_lanes(ProxyUnderTest& proxy) {
    std::mutex mu;
    LanesResult r;
    std::atomic<int> completed{0};
    std::atomic<int> aborted{0};
    {
        std::vector<std::jthread> lanes;
        for (int lane = 0; lane < kLanes; ++lane) {
            lanes.emplace_back([&, lane] {
                for (int i = 0; i < kPerLane; ++i) {
                    const uint32_t id = static_cast<uint32_t>(lane * kPerLane + i + 1);
                    const bool abort = i % 3 == 1;
                    const Outcome o = run_connection(proxy.endpoint(), id, abort);
                    if (!o.ok) {
                        std::lock_guard lock(mu);
                        r.failures.push_back(o.error);
                    } else {
                        ++(abort ? aborted : completed);
                    }
                }
            });
        }
    }
    r.completed = completed.load();
    r.aborted = aborted.load();
    r.stats = proxy.stats();
    std::printf("completed=%d aborted=%d %s\n", r.completed, r.aborted, r.stats.to_line().c_str());
    EXPECT_TRUE(r.failures.empty())
        << r.failures.size()
        << " failures, first: " << (r.failures.empty() ? "" : r.failures.front());
    EXPECT_EQ(r.completed + r.aborted, kLanes * kPerLane);
    return r;
}

TEST(Isolation, OnePipeSharedByManyConnectionsSomeAborted) {
    EchoServer upstream;
    ProxyUnderTest proxy(upstream.endpoint(), [&](EngineConfig& c) {
        c.data_path = DataPath::Splice;
        c.splice.max_pipes = 1; // per shard: every connection on a shard shares it
    });

    const LanesResult r = run_lanes(proxy);
    EXPECT_GT(r.stats.pipes_closed_dirty, 0u) << "no pipe was ever closed dirty: the test did "
                                                 "not exercise what it claims to";
}

// The copy path's buffers are shared the same way: two per shard, taken in turn by
// every connection, some of which die holding one.
TEST(Isolation, TwoCopyBuffersSharedByManyConnectionsSomeAborted) {
    EchoServer upstream;
    ProxyUnderTest proxy(upstream.endpoint(), [&](EngineConfig& c) {
        c.data_path = DataPath::Copy;
        c.copy.copy_buffers = 2;
    });

    const LanesResult r = run_lanes(proxy);
    EXPECT_EQ(r.stats.splices, 0u);
    EXPECT_GT(r.stats.buffer_waits, 0u) << "no receive ever found the buffers taken: the test "
                                           "did not exercise what it claims to";
}

// The default path, auto, holds both: a direction starts on the copy path's buffers and
// moves to the pipe when it turns bulk, so here both are scarce (one pipe, two buffers
// per shard) and both are shared by connections that die holding them.
TEST(Isolation, AutoPathSharesOnePipeAndTwoCopyBuffersSomeAborted) {
    EchoServer upstream;
    ProxyUnderTest proxy(upstream.endpoint(), [&](EngineConfig& c) {
        c.data_path = DataPath::Auto;
        c.splice.max_pipes = 1;
        c.copy.copy_buffers = 2;
    });

    const LanesResult r = run_lanes(proxy);
    EXPECT_GT(r.stats.switches_to_splice, 0u) << "no direction moved to the pipe";
    EXPECT_GT(r.stats.copy_receives, 0u) << "no direction copied";
    EXPECT_GT(r.stats.pipes_closed_dirty, 0u) << "no pipe was ever closed dirty";
    EXPECT_GT(r.stats.buffer_waits, 0u) << "no receive ever found the buffers taken";
}

} // namespace
} // namespace uringfwd::test
