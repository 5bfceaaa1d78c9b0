// The active health checker: one per engine, not one per shard, so a member gets one
// check per interval however many shards there are.
//
// What a check is. A non-blocking stream socket connects to the member (TCP, or a Unix
// socket for a Unix member). With `send` empty, a completed connect passes. Otherwise
// `send` is written in full; with `expect` empty that passes (any reply, or none),
// else the reply is read until `expect.size()` bytes have come, and passes if it
// starts with `expect`. Anything else fails: refused, reset, closed before the whole
// prefix arrived, a differing byte (fails at once), or `timeout` running out. The one
// `timeout` bounds the whole check, connect, send and reply together. Every fd is
// closed when its check ends.
//
// Timing. A target's first check starts at start(), staggered by a few milliseconds
// per target (at most interval / targets) so that checks do not all fire together;
// then one starts every `interval` after the previous one started, or at once when a
// check took longer than that. `fall` failed checks in a row mark an up target down,
// `rise` passed checks in a row a down target up; each change is logged once (warn when
// down, info when up) and counted in stats(). Disabled targets are never checked and
// stay `initially_up`. A socket that cannot be opened (out of fds) is a local problem,
// not the member's: that check is skipped, neither passed nor failed, and logged.
//
// Threads. The checks run on the checker's own thread ("fwd-health") through its own
// io_uring, never a shard's: connect, send and receive are ring operations, each
// soft-linked to a LINK_TIMEOUT of what is left of the check's timeout, and the thread
// sleeps only in Ring::submit_and_wait(), so a dead member never blocks anything. The
// shards only read up(), an atomic, when they choose a member. stop() cancels what is
// in flight and waits for every completion before the ring and the sockets go.
#pragma once

#include "net/socket_address.hpp"
#include "support/logger.hpp"
#include "uring/unique_fd.hpp"
#include "uringfwd/route.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace uringfwd::engine {

struct HealthTarget {
    std::string route;
    std::string member; // the member's address as text, for log lines
    SocketAddress address;
    HealthCheck check;
    bool initially_up = true;
    // Not checked until set_paused(false): its member is in maintenance (runtime.hpp).
    bool initially_paused = false;
};

class HealthChecker {
public:
    // Called on the checker's thread when a target goes down or comes back up, after
    // up() says so; must not block (it may post to the shards' mailboxes).
    using OnChange = std::function<void(std::size_t target, bool up)>;

    // Starts nothing: no thread, ring or socket until start().
    HealthChecker(std::vector<HealthTarget> targets, Logger log, OnChange on_change = {});
    ~HealthChecker(); // stop()
    HealthChecker(const HealthChecker&) = delete;
    HealthChecker& operator=(const HealthChecker&) = delete;

    // Spawns the checker thread and returns once its ring is set up. Throws
    // std::runtime_error (uring::RingError when io_uring is unavailable) if it cannot
    // be, and std::logic_error if called a second time.
    void start();
    // Thread-safe and idempotent: wakes the thread (an eventfd it polls through its
    // ring), which cancels the checks in flight and ends once their completions are in;
    // returns when it has. A no-op before start().
    void stop();

    // Whether target number `target` (an index into the constructor's vector) is up:
    // one relaxed atomic load, for the shards choosing a member.
    bool up(std::size_t target) const {
        return published_[target].up.load(std::memory_order_relaxed);
    }

    struct TargetStats {
        bool up;
        uint64_t checks;      // completed, passed or failed
        uint64_t failures;    // failed checks
        uint64_t transitions; // up -> down and down -> up
    };
    // Readable from any thread. The fields are read one by one, not as a snapshot, but
    // the counts include at least the checks that led to `up`.
    TargetStats stats(std::size_t target) const;
    std::size_t size() const { return targets_.size(); }

    // Thread-safe: a paused target is not checked from its next due check on (one in
    // progress ends as it would), and its verdict stays what it was; unpaused, its
    // checks go on at their next due time. Maintenance (MemberState::Maint).
    void set_paused(std::size_t target, bool paused) {
        published_[target].paused.store(paused, std::memory_order_relaxed);
    }
    bool paused(std::size_t target) const {
        return published_[target].paused.load(std::memory_order_relaxed);
    }

private:
    class Loop; // the checker thread's ring and checks (health_checker.cpp)

    // What the checker thread publishes per target. It alone writes; anyone reads.
    struct Published {
        std::atomic<bool> up{true};
        std::atomic<uint64_t> checks{0};
        std::atomic<uint64_t> failures{0};
        std::atomic<uint64_t> transitions{0};
        std::atomic<bool> paused{false}; // written by anyone (set_paused)
    };

    void run(std::promise<void>& ready);

    const std::vector<HealthTarget> targets_;
    const Logger log_;
    const OnChange on_change_;
    std::unique_ptr<Published[]> published_;
    uring::UniqueFd wake_fd_;
    std::mutex lifecycle_mu_; // start() and stop()
    bool started_ = false;
    std::thread thread_;
};

} // namespace uringfwd::engine
