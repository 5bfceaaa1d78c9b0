// The active health checker against real servers on loopback: connects refused and
// accepted again, send/expect with right, wrong and missing replies, a blackholed
// member, disabled checks, and stop() with checks in flight. Every test is bounded by a
// Watchdog and every wait by a Deadline.
#include "health/health_checker.hpp"

#include "net/socket_address.hpp"
#include "support/logger.hpp"
#include "tests/support/blackhole.hpp"
#include "tests/support/connection_server.hpp"
#include "tests/support/deadline.hpp"
#include "tests/support/eventually.hpp"
#include "tests/support/proc_stats.hpp"
#include "tests/support/scripted_peer.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/unique_fd.hpp"
#include "tests/support/watchdog.hpp"

#include <gtest/gtest.h>

#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using uringfwd::Endpoint;
using uringfwd::HealthCheck;
using uringfwd::LogLevel;
using uringfwd::engine::HealthChecker;
using uringfwd::engine::HealthTarget;
using uringfwd::engine::Logger;
using uringfwd::test::Blackhole;
using uringfwd::test::ConnectionServer;
using uringfwd::test::count_open_fds;
using uringfwd::test::count_threads_with_prefix;
using uringfwd::test::Deadline;
using uringfwd::test::Family;
using uringfwd::test::IoStatus;
using uringfwd::test::listen_loopback;
using uringfwd::test::listen_on;
using uringfwd::test::Listener;
using uringfwd::test::SilentServer;
using uringfwd::test::try_connect;
using uringfwd::test::UniqueFd;
using uringfwd::test::Watchdog;
using Clock = std::chrono::steady_clock;

constexpr auto kTestLimit = 20s;
// Scheduling noise on a loaded 2-CPU machine: what a timer may run late by.
constexpr auto kSlack = 600ms;
// Timers never fire early, but a check may start just before the event a test times
// from, and the clocks are read with a millisecond's rounding.
constexpr auto kEarly = 5ms;

// Collects every log line the checker writes (the sink may be called from its thread),
// under the prefix the engine gives it (route_table.cpp).
class CapturedLog {
public:
    Logger logger() {
        return Logger(
            LogLevel::Info,
            [this](LogLevel, std::string_view line) {
                std::lock_guard lock(mu_);
                lines_.emplace_back(line);
            },
            "health");
    }
    std::vector<std::string> lines() const {
        std::lock_guard lock(mu_);
        return lines_;
    }
    std::size_t count(std::string_view needle) const {
        std::lock_guard lock(mu_);
        std::size_t n = 0;
        for (const std::string& line : lines_)
            n += line.find(needle) != std::string::npos ? 1 : 0;
        return n;
    }
    // The checker publishes a state change a moment before it logs it: a test that saw
    // the change waits (bounded) for the line, then counts.
    std::size_t count_after_wait(std::string_view needle) const {
        eventually([&] { return count(needle) != 0; }, Deadline{2s}, 1ms);
        return count(needle);
    }
    std::string dump() const {
        std::string out;
        for (const std::string& line : lines())
            out += line + "\n";
        return out;
    }

private:
    mutable std::mutex mu_;
    std::vector<std::string> lines_;
};

HealthCheck enabled_check(std::chrono::milliseconds interval, std::chrono::milliseconds timeout,
                          unsigned rise, unsigned fall) {
    HealthCheck check;
    check.enabled = true;
    check.interval = interval;
    check.timeout = timeout;
    check.rise = rise;
    check.fall = fall;
    return check;
}

HealthTarget target_for(const Endpoint& endpoint, HealthCheck check, bool initially_up = true) {
    return HealthTarget{"web", endpoint.to_string(), uringfwd::engine::resolve(endpoint),
                        std::move(check), initially_up};
}

// Polls every millisecond: the checks under test are 50 ms apart.
bool wait_until(const std::function<bool()>& condition, const Deadline& deadline) {
    return eventually(condition, deadline, 1ms);
}

std::string transition_line(const Endpoint& endpoint, std::string_view rest) {
    return "health: route \"web\" upstream " + endpoint.to_string() + " is " + std::string(rest);
}

long long ms_between(Clock::time_point from, Clock::time_point to) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(to - from).count();
}

// Reads the 6-byte request ("PING\r\n") and writes `answer`, once per connection.
ConnectionServer ping_server(std::string answer) {
    return ConnectionServer(
        listen_loopback(Family::Inet4), [answer = std::move(answer)](UniqueFd conn, int) {
            std::array<std::byte, 6> request{};
            auto r = uringfwd::test::recv_all(conn.get(), request, Deadline(2s));
            if (r.status != IoStatus::Ok)
                return;
            uringfwd::test::send_text(conn.get(), answer, Deadline(2s));
        });
}

HealthCheck ping_check(std::chrono::milliseconds interval, std::chrono::milliseconds timeout,
                       unsigned rise, unsigned fall) {
    HealthCheck check = enabled_check(interval, timeout, rise, fall);
    check.send = "PING\r\n";
    check.expect = "+PONG";
    return check;
}

bool has_pending_connection(int listen_fd) {
    pollfd pfd{listen_fd, POLLIN, 0};
    return ::poll(&pfd, 1, 0) == 1;
}

TEST(HealthCheck, RefusedConnectsTakeATargetDownAndListeningAgainBringsItBack) {
    Watchdog watchdog(kTestLimit, "HealthCheck.RefusedConnects...");
    constexpr auto kInterval = 50ms;
    constexpr unsigned kRise = 2;
    constexpr unsigned kFall = 3;
    CapturedLog log;
    Listener listener = listen_loopback(Family::Inet4);
    const Endpoint endpoint = listener.endpoint();
    std::vector<HealthTarget> targets;
    targets.push_back(target_for(endpoint, enabled_check(kInterval, 500ms, kRise, kFall)));
    HealthChecker checker(std::move(targets), log.logger());
    checker.start();

    ASSERT_TRUE(wait_until([&] { return checker.stats(0).checks >= 2; }, Deadline(5s)));
    EXPECT_TRUE(checker.up(0));
    EXPECT_EQ(checker.stats(0).failures, 0u);
    EXPECT_EQ(log.lines().size(), 0u) << log.dump();

    // Nothing listens on the port now: every connect is refused.
    listener = Listener{};
    const auto closed = Clock::now();
    ASSERT_TRUE(wait_until([&] { return !checker.up(0); }, Deadline(5s)));
    const auto down = Clock::now();
    HealthChecker::TargetStats s = checker.stats(0);
    EXPECT_GE(s.failures, kFall);
    EXPECT_EQ(s.transitions, 1u);
    // Checks start kInterval apart and the first failing one may start right at the
    // close (a few microseconds before it, if its connect reached the port just after):
    // kFall failures in a row take (kFall - 1) intervals from there.
    EXPECT_GE(ms_between(closed, down), ((kFall - 1) * kInterval - kEarly).count());
    // Down exactly at the kFall-th failure in a row, said once.
    EXPECT_EQ(log.count_after_wait(
                  transition_line(endpoint, "down (3 checks failed: connection refused)")),
              1u)
        << log.dump();

    listener = listen_on(endpoint); // the same port again
    const auto relistened = Clock::now();
    ASSERT_TRUE(wait_until([&] { return checker.up(0); }, Deadline(5s)));
    const auto up = Clock::now();
    EXPECT_EQ(checker.stats(0).transitions, 2u);
    EXPECT_GE(ms_between(relistened, up), ((kRise - 1) * kInterval - kEarly).count());
    EXPECT_EQ(log.count_after_wait(transition_line(endpoint, "up (2 checks passed)")), 1u)
        << log.dump();

    checker.stop();
    EXPECT_EQ(log.lines().size(), 2u) << log.dump(); // one line per transition, no more
    // The logger's prefix names the checker; the message does not say it again.
    EXPECT_EQ(log.count("health: health:"), 0u) << log.dump();
}

TEST(HealthCheck, ReplyStartingWithExpectPasses) {
    Watchdog watchdog(kTestLimit, "HealthCheck.ReplyStartingWithExpectPasses");
    CapturedLog log;
    ConnectionServer server = ping_server("+PONG\r\n");
    std::vector<HealthTarget> targets;
    targets.push_back(
        target_for(server.endpoint(), ping_check(50ms, 1000ms, 2, 3), /*initially_up=*/false));
    HealthChecker checker(std::move(targets), log.logger());
    EXPECT_FALSE(checker.up(0));
    checker.start();

    ASSERT_TRUE(wait_until([&] { return checker.up(0); }, Deadline(5s)));
    EXPECT_EQ(checker.stats(0).failures, 0u);
    EXPECT_EQ(checker.stats(0).transitions, 1u);
    EXPECT_EQ(log.count_after_wait(transition_line(server.endpoint(), "up (2 checks passed)")), 1u)
        << log.dump();
}

TEST(HealthCheck, ReplyNotStartingWithExpectFails) {
    Watchdog watchdog(kTestLimit, "HealthCheck.ReplyNotStartingWithExpectFails");
    CapturedLog log;
    ConnectionServer server = ping_server("-ERR\r\n");
    std::vector<HealthTarget> targets;
    targets.push_back(target_for(server.endpoint(), ping_check(50ms, 1000ms, 2, 2)));
    HealthChecker checker(std::move(targets), log.logger());
    checker.start();

    ASSERT_TRUE(wait_until([&] { return !checker.up(0); }, Deadline(5s)));
    EXPECT_GE(checker.stats(0).failures, 2u);
    EXPECT_EQ(log.count_after_wait(transition_line(
                  server.endpoint(), "down (2 checks failed: unexpected reply \"-ERR")),
              1u)
        << log.dump();
}

// The member accepts, reads nothing and never answers: the reply never comes, and the
// check fails when its timeout runs out, not later.
TEST(HealthCheck, MissingReplyFailsByTimeout) {
    Watchdog watchdog(kTestLimit, "HealthCheck.MissingReplyFailsByTimeout");
    constexpr auto kTimeout = 200ms;
    CapturedLog log;
    SilentServer server;
    std::vector<HealthTarget> targets;
    targets.push_back(target_for(server.endpoint(), ping_check(10s, kTimeout, 2, 1)));
    HealthChecker checker(std::move(targets), log.logger());
    const auto started = Clock::now();
    checker.start();

    ASSERT_TRUE(wait_until([&] { return checker.stats(0).failures >= 1; }, Deadline(5s)));
    const auto failed = Clock::now();
    EXPECT_GE(ms_between(started, failed), kTimeout.count());
    EXPECT_LT(ms_between(started, failed), (kTimeout + kSlack).count());
    EXPECT_FALSE(checker.up(0));
    EXPECT_EQ(server.accepted(), 1u);
    EXPECT_EQ(log.count_after_wait(transition_line(
                  server.endpoint(), "down (1 check failed: timed out waiting for the reply")),
              1u)
        << log.dump();
}

// The SYN is dropped: the connect itself never completes, and its linked timeout ends it.
TEST(HealthCheck, BlackholedMemberFailsByTimeout) {
    Watchdog watchdog(kTestLimit, "HealthCheck.BlackholedMemberFailsByTimeout");
    constexpr auto kTimeout = 200ms;
    CapturedLog log;
    const Blackhole hole;
    std::vector<HealthTarget> targets;
    targets.push_back(target_for(hole.endpoint(), enabled_check(10s, kTimeout, 2, 1)));
    HealthChecker checker(std::move(targets), log.logger());
    const auto started = Clock::now();
    checker.start();

    ASSERT_TRUE(wait_until([&] { return checker.stats(0).failures >= 1; }, Deadline(5s)));
    const auto failed = Clock::now();
    EXPECT_GE(ms_between(started, failed), kTimeout.count());
    EXPECT_LT(ms_between(started, failed), (kTimeout + kSlack).count());
    EXPECT_FALSE(checker.up(0));
    EXPECT_EQ(log.count_after_wait(transition_line(
                  hole.endpoint(), "down (1 check failed: timed out connecting (200 ms))")),
              1u)
        << log.dump();
}

// A Unix socket member is checked the same way: its own socket family, no TCP.
TEST(HealthCheck, UnixSocketMember) {
    Watchdog watchdog(kTestLimit, "HealthCheck.UnixSocketMember");
    CapturedLog log;
    Listener listener = listen_loopback(Family::Unix);
    const Endpoint endpoint = listener.endpoint();
    std::vector<HealthTarget> targets;
    targets.push_back(target_for(endpoint, enabled_check(20ms, 500ms, 1, 2)));
    HealthChecker checker(std::move(targets), log.logger());
    checker.start();

    ASSERT_TRUE(wait_until([&] { return checker.stats(0).checks >= 2; }, Deadline(5s)));
    EXPECT_TRUE(checker.up(0));
    EXPECT_EQ(checker.stats(0).failures, 0u);

    listener = Listener{}; // closes and removes the socket file
    ASSERT_TRUE(wait_until([&] { return !checker.up(0); }, Deadline(5s)));
    EXPECT_EQ(log.count_after_wait(transition_line(endpoint, "down (2 checks failed: ")), 1u)
        << log.dump();
}

// Each target has its own state; disabled ones are never connected to and keep the
// state they were given.
TEST(HealthCheck, DisabledTargetsAreNeverChecked) {
    Watchdog watchdog(kTestLimit, "HealthCheck.DisabledTargetsAreNeverChecked");
    CapturedLog log;
    Listener alive = listen_loopback(Family::Inet4);
    Listener untouched_up = listen_loopback(Family::Inet4);
    Listener untouched_down = listen_loopback(Family::Inet4);
    uringfwd::test::ReservedPort refusing = uringfwd::test::reserve_refusing_port();

    HealthCheck disabled = enabled_check(20ms, 500ms, 1, 1);
    disabled.enabled = false;
    std::vector<HealthTarget> targets;
    targets.push_back(target_for(alive.endpoint(), enabled_check(20ms, 500ms, 1, 1)));
    targets.push_back(target_for(untouched_up.endpoint(), disabled, /*initially_up=*/true));
    targets.push_back(target_for(untouched_down.endpoint(), disabled, /*initially_up=*/false));
    targets.push_back(target_for(refusing.endpoint, enabled_check(20ms, 500ms, 1, 1)));
    HealthChecker checker(std::move(targets), log.logger());
    ASSERT_EQ(checker.size(), 4u);
    checker.start();

    ASSERT_TRUE(
        wait_until([&] { return checker.stats(0).checks >= 5 && checker.stats(3).checks >= 5; },
                   Deadline(5s)));
    checker.stop();

    EXPECT_TRUE(checker.up(0));
    EXPECT_EQ(checker.stats(0).failures, 0u);
    EXPECT_TRUE(has_pending_connection(alive.fd()));
    EXPECT_FALSE(checker.up(3));
    EXPECT_EQ(checker.stats(3).transitions, 1u);

    for (std::size_t i : {1u, 2u}) {
        HealthChecker::TargetStats s = checker.stats(i);
        EXPECT_EQ(s.checks, 0u) << "target " << i;
        EXPECT_EQ(s.transitions, 0u) << "target " << i;
    }
    EXPECT_TRUE(checker.up(1));
    EXPECT_FALSE(checker.up(2));
    EXPECT_FALSE(has_pending_connection(untouched_up.fd()));
    EXPECT_FALSE(has_pending_connection(untouched_down.fd()));
    EXPECT_EQ(log.lines().size(), 1u) << log.dump(); // target 3 going down
}

// A connect that gets no answer and a reply that never comes, both with long timeouts:
// stop() cancels them, returns at once, and every socket, the ring and the thread are
// gone. A check cut short by stop() is neither a pass nor a failure.
TEST(HealthCheck, StopWithChecksInFlightIsPromptAndLeaksNothing) {
    Watchdog watchdog(kTestLimit, "HealthCheck.StopWithChecksInFlightIsPromptAndLeaksNothing");
    CapturedLog log;
    const Blackhole hole;
    // Listens but never accepts: the kernel completes the handshake, the check sends its
    // request, and waits for a reply.
    Listener mute = listen_loopback(Family::Inet4);
    const int fds_before = count_open_fds();
    ASSERT_GT(fds_before, 0);
    {
        std::vector<HealthTarget> targets;
        targets.push_back(target_for(hole.endpoint(), enabled_check(30s, 30s, 1, 1)));
        targets.push_back(target_for(mute.endpoint(), ping_check(30s, 30s, 1, 1)));
        HealthChecker checker(std::move(targets), log.logger());
        checker.start();
        EXPECT_EQ(count_threads_with_prefix(0, "fwd-health"), 1);

        ASSERT_TRUE(wait_until([&] { return has_pending_connection(mute.fd()); }, Deadline(5s)));
        std::this_thread::sleep_for(50ms); // the send and the receive are submitted

        const auto stopping = Clock::now();
        checker.stop();
        EXPECT_LT(ms_between(stopping, Clock::now()), 1000);
        checker.stop(); // idempotent
        for (std::size_t i = 0; i < checker.size(); ++i) {
            EXPECT_EQ(checker.stats(i).checks, 0u) << "target " << i;
            EXPECT_TRUE(checker.up(i)) << "target " << i;
        }
        EXPECT_EQ(count_threads_with_prefix(0, "fwd-health"), 0);
    }
    EXPECT_EQ(count_open_fds(), fds_before);
    EXPECT_EQ(log.lines().size(), 0u) << log.dump();
}

// Lowers RLIMIT_NOFILE's soft limit for a scope, and puts it back.
class FdLimitScope {
public:
    explicit FdLimitScope(rlim_t soft) {
        EXPECT_EQ(::getrlimit(RLIMIT_NOFILE, &saved_), 0);
        rlimit lowered = saved_;
        lowered.rlim_cur = soft;
        EXPECT_EQ(::setrlimit(RLIMIT_NOFILE, &lowered), 0);
    }
    ~FdLimitScope() { ::setrlimit(RLIMIT_NOFILE, &saved_); }
    FdLimitScope(const FdLimitScope&) = delete;
    FdLimitScope& operator=(const FdLimitScope&) = delete;

private:
    rlimit saved_{};
};

// With one fd left, start() gets its eventfd but the thread cannot create its ring
// (io_uring_setup fails with EMFILE): start() says so by throwing, and leaves nothing
// running.
TEST(HealthCheck, StartThrowsWhenTheRingCannotBeSetUp) {
    Watchdog watchdog(kTestLimit, "HealthCheck.StartThrowsWhenTheRingCannotBeSetUp");
    CapturedLog log;
    Listener listener = listen_loopback(Family::Inet4);
    std::vector<HealthTarget> targets;
    targets.push_back(target_for(listener.endpoint(), enabled_check(20ms, 500ms, 1, 1)));
    HealthChecker checker(std::move(targets), log.logger());
    {
        FdLimitScope limit(static_cast<rlim_t>(count_open_fds() + 64));
        std::vector<UniqueFd> filler;
        for (;;) {
            UniqueFd fd(::dup(listener.fd()));
            if (!fd)
                break;
            filler.push_back(std::move(fd));
        }
        ASSERT_EQ(errno, EMFILE);
        ASSERT_FALSE(filler.empty());
        filler.pop_back(); // exactly one fd is free now

        try {
            checker.start();
            ADD_FAILURE() << "start() returned with no fd left for the ring";
        } catch (const std::runtime_error& e) {
            EXPECT_NE(std::string(e.what()).find("io_uring"), std::string::npos) << e.what();
        }
    }
    // start() joined the thread it began, but a joined thread may still be listed in
    // /proc for a moment: glibc's join returns when the kernel clears the thread's tid
    // (kernel/fork.c mm_release, CLONE_CHILD_CLEARTID), before the task is unhashed
    // (release_task). It must be gone soon after, not linger.
    EXPECT_TRUE(
        eventually([] { return count_threads_with_prefix(0, "fwd-health") == 0; }, Deadline{2s}))
        << count_threads_with_prefix(0, "fwd-health") << " fwd-health thread(s) live on";
    EXPECT_EQ(checker.stats(0).checks, 0u);
    EXPECT_THROW(checker.start(), std::logic_error); // started once, even if it failed
    checker.stop();
}

TEST(HealthCheck, StopBeforeStartAndStartTwice) {
    Watchdog watchdog(kTestLimit, "HealthCheck.StopBeforeStartAndStartTwice");
    CapturedLog log;
    HealthChecker idle({}, log.logger());
    idle.stop(); // nothing to stop
    EXPECT_EQ(idle.size(), 0u);

    HealthChecker checker({}, log.logger());
    checker.start();
    EXPECT_THROW(checker.start(), std::logic_error);
    checker.stop();
}

} // namespace
