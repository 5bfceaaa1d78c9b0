// The checker thread's side of HealthChecker: its ring and each target's check, as a
// sequence of steps (connect, send, receive), each one ring operation soft-linked to a
// timeout. Private to engine/health/.
#pragma once

#include "health/health_checker.hpp"
#include "health/health_rules.hpp"
#include "net/sockets.hpp"
#include "support/log_throttle.hpp"
#include "uring/ring.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace uringfwd::engine {

namespace health_detail {

using Clock = std::chrono::steady_clock;

// Two entries in flight per checked target at most (an operation and its linked
// timeout, or a timer); a fuller queue is submitted early by the ring, and chains are
// kept whole by reserve().
constexpr unsigned kRingEntries = 64;
// The first checks of successive targets start this far apart (or closer, to fit
// them all within one interval).
constexpr Clock::duration kStaggerStep = std::chrono::milliseconds{5};
// A zero interval or timeout from a config that skipped validation would spin.
constexpr std::chrono::milliseconds kMinPeriod{1};

// What a completion belongs to: the operation and the target's index.
enum class Op : uint8_t {
    Wake = 1, // the stop eventfd became readable
    Timer,    // the next check of a target is due
    Connect,  // a check's steps: each soft-linked to a StepTimeout
    Send,
    Recv,
    StepTimeout, // LINK_TIMEOUT: the check's time is up
    Cancel,      // on stop: withdraws a target's timer or step
};
constexpr uint32_t kNoTarget = 0xffffffffu;

inline uint64_t tag(Op op, std::size_t target) {
    return static_cast<uint64_t>(target) << 8 | static_cast<uint8_t>(op);
}
inline Op op_of(uint64_t tag) {
    return static_cast<Op>(tag & 0xff);
}
inline std::size_t target_of(uint64_t tag) {
    return static_cast<std::size_t>(tag >> 8);
}

// "connection refused": strerror made to fit inside a log sentence.
inline std::string describe_errno(int err) {
    std::string text = std::strerror(err);
    if (!text.empty())
        text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
    return text;
}

// Where a check is. Every step but Idle and Waiting is one ring operation with its
// linked timeout; the next step starts only once both have completed.
enum class Step { Idle, Waiting, Connect, Send, Recv };

inline const char* doing(Step step) {
    switch (step) {
    case Step::Connect:
        return "connecting";
    case Step::Send:
        return "sending";
    case Step::Recv:
        return "waiting for the reply";
    default:
        return "checking";
    }
}

} // namespace health_detail

// Everything that lives on the checker thread: the ring (created there, its only
// submitter: docs/kernel.md §7) and the state of each target's check.
class HealthChecker::Loop {
    using Clock = health_detail::Clock;
    using Op = health_detail::Op;
    using Step = health_detail::Step;

public:
    // Throws uring::RingError.
    explicit Loop(HealthChecker& owner);

    // Checks until stop() and until every operation has completed.
    void run();

private:
    struct Probe {
        Probe(std::size_t i, const HealthTarget& t, Published& pub)
            : index(i), target(&t), published(&pub),
              rules(t.initially_up, t.check.rise, t.check.fall),
              interval(std::max<Clock::duration>(t.check.interval, health_detail::kMinPeriod)),
              timeout(std::max<Clock::duration>(t.check.timeout, health_detail::kMinPeriod)) {}

        std::size_t index;
        const HealthTarget* target;
        Published* published;
        RiseFall rules;
        Clock::duration interval;
        Clock::duration timeout;
        Step step = Step::Idle;
        unsigned pending = 0;   // the step's operations not completed yet
        int result = 0;         // the step's operation
        bool op_done = false;   // its completion is in (its linked timeout's may not be)
        bool timed_out = false; // its linked timeout fired
        UniqueFd fd;
        Clock::time_point started;
        Clock::time_point deadline;
        std::size_t sent = 0;
        std::string reply; // expect.size() bytes, filled from the front
        std::size_t received = 0;
    };

    void dispatch(const uring::Completion& c);
    void on_step_completion(Probe& p, Op op, int result);
    void on_step_done(Probe& p);
    void begin_check(Probe& p);
    void submit_step(Probe& p, Step step);
    void finish_check(Probe& p, const std::string* failure);
    void schedule(Probe& p, Clock::duration delay);
    void begin_stop();

    const HealthChecker& owner_;
    uring::Ring ring_;
    std::vector<Probe> probes_; // one per target, by index; disabled ones stay Idle
    unsigned in_flight_ = 0;    // every operation submitted and not completed
    bool stopping_ = false;
    LogThrottle local_errors_;
};

} // namespace uringfwd::engine
