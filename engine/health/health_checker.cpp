#include "health/health_checker.hpp"

#include "health/health_rules.hpp"
#include "net/sockets.hpp"
#include "support/log_throttle.hpp"
#include "support/quote_input.hpp"
#include "uring/ring.hpp"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

namespace uringfwd::engine {

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// Two entries in flight per checked target at most (an operation and its linked
// timeout, or a timer); a fuller queue is submitted early by the ring, and chains are
// kept whole by reserve().
constexpr unsigned kRingEntries = 64;
// The first checks of successive targets start this far apart (or closer, to fit
// them all within one interval).
constexpr Clock::duration kStaggerStep = 5ms;
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

uint64_t tag(Op op, std::size_t target) {
    return static_cast<uint64_t>(target) << 8 | static_cast<uint8_t>(op);
}
Op op_of(uint64_t tag) {
    return static_cast<Op>(tag & 0xff);
}
std::size_t target_of(uint64_t tag) {
    return static_cast<std::size_t>(tag >> 8);
}

// "connection refused": strerror made to fit inside a log sentence.
std::string describe_errno(int err) {
    std::string text = std::strerror(err);
    if (!text.empty())
        text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
    return text;
}

// Where a check is. Every step but Idle and Waiting is one ring operation with its
// linked timeout; the next step starts only once both have completed.
enum class Step { Idle, Waiting, Connect, Send, Recv };

const char* doing(Step step) {
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

} // namespace

// Everything that lives on the checker thread: the ring (created there, its only
// submitter: docs/kernel.md §7) and the state of each target's check.
class HealthChecker::Loop {
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
              interval(std::max<Clock::duration>(t.check.interval, kMinPeriod)),
              timeout(std::max<Clock::duration>(t.check.timeout, kMinPeriod)) {}

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

HealthChecker::Loop::Loop(HealthChecker& owner) : owner_(owner), ring_(kRingEntries) {
    probes_.reserve(owner.targets_.size());
    for (std::size_t i = 0; i < owner.targets_.size(); ++i)
        probes_.emplace_back(i, owner.targets_[i], owner.published_[i]);
}

void HealthChecker::Loop::run() {
    // The thread sleeps only in submit_and_wait(), so stop() has to reach it as a
    // completion: a one-shot poll on its eventfd. An eventfd written before the poll
    // is armed completes it at once (docs/kernel.md §2.3).
    ring_.poll(owner_.wake_fd_.get(), POLLIN, tag(Op::Wake, kNoTarget));
    ++in_flight_;

    std::size_t enabled = 0;
    for (const Probe& p : probes_)
        enabled += p.target->check.enabled ? 1 : 0;
    std::size_t k = 0;
    for (Probe& p : probes_) {
        if (!p.target->check.enabled)
            continue;
        Clock::duration stagger = std::min(kStaggerStep, p.interval / static_cast<long>(enabled));
        schedule(p, stagger * static_cast<long>(k++));
    }

    while (!stopping_ || in_flight_ > 0) {
        for (const uring::Completion& c : ring_.submit_and_wait(1))
            dispatch(c);
    }
}

void HealthChecker::Loop::dispatch(const uring::Completion& c) {
    --in_flight_;
    Op op = op_of(c.user_data);
    if (op == Op::Wake) {
        begin_stop();
        return;
    }
    std::size_t index = target_of(c.user_data);
    if (op == Op::Cancel || index >= probes_.size())
        return; // a cancel's own result says nothing: the target's operation reports
    Probe& p = probes_[index];
    if (op == Op::Timer) {
        p.step = Step::Idle;
        if (!stopping_)
            begin_check(p);
        return;
    }
    on_step_completion(p, op, c.result);
}

void HealthChecker::Loop::on_step_completion(Probe& p, Op op, int result) {
    --p.pending;
    if (op == Op::StepTimeout) {
        // -ETIME: it fired and cancelled the operation; -ECANCELED: the operation
        // completed first and disarmed it.
        if (result == -ETIME)
            p.timed_out = true;
    } else {
        p.result = result;
        p.op_done = true;
    }
    if (p.pending == 0)
        on_step_done(p);
}

void HealthChecker::Loop::on_step_done(Probe& p) {
    if (stopping_) {
        // Cancelled by stop(): neither a pass nor a failure.
        p.fd.reset();
        p.step = Step::Idle;
        return;
    }
    const HealthCheck& check = p.target->check;
    if (p.result < 0) {
        // A timeout that fired may race the operation it guards: an operation that
        // succeeded counts, one cancelled by the timeout is the timeout's failure.
        std::string failure =
            p.timed_out && p.result == -ECANCELED
                ? fmt::format(
                      "timed out {} ({} ms)", doing(p.step),
                      std::chrono::duration_cast<std::chrono::milliseconds>(p.timeout).count())
                : describe_errno(-p.result);
        finish_check(p, &failure);
        return;
    }
    switch (p.step) {
    case Step::Connect:
        if (check.send.empty())
            finish_check(p, nullptr);
        else
            submit_step(p, Step::Send);
        return;
    case Step::Send:
        p.sent += static_cast<std::size_t>(p.result);
        if (p.sent < check.send.size())
            submit_step(p, Step::Send); // a short send: the rest, in what time is left
        else if (check.expect.empty())
            finish_check(p, nullptr); // "any reply, or none": the send was the test
        else
            submit_step(p, Step::Recv);
        return;
    case Step::Recv: {
        if (p.result == 0) {
            std::string failure = p.received == 0
                                      ? std::string("connection closed without a reply")
                                      : fmt::format("connection closed after {} of {} reply bytes",
                                                    p.received, check.expect.size());
            finish_check(p, &failure);
            return;
        }
        p.received += static_cast<std::size_t>(p.result);
        std::string_view reply(p.reply.data(), p.received);
        switch (judge_reply(check.expect, reply)) {
        case ReplyVerdict::Pass:
            finish_check(p, nullptr);
            return;
        case ReplyVerdict::Fail: {
            std::string failure = fmt::format("unexpected reply {}", quote_input(reply));
            finish_check(p, &failure);
            return;
        }
        case ReplyVerdict::NeedMore:
            submit_step(p, Step::Recv);
            return;
        }
        return;
    }
    case Step::Idle:
    case Step::Waiting:
        return;
    }
}

void HealthChecker::Loop::begin_check(Probe& p) {
    p.started = Clock::now();
    p.deadline = p.started + p.timeout;
    p.sent = 0;
    p.received = 0;
    p.reply.assign(p.target->check.expect.size(), '\0');
    // Non-blocking, as every socket the engine hands to io_uring (docs/kernel.md §0
    // rule 1): no operation on it may ever wait on an io-wq worker. Issued inline, the
    // connect waits in io_uring's internal poll, on no kernel thread, and its timeout or
    // stop() cancels it at once. Closed by finish_check() or by the next check (RAII),
    // only once every operation on it has completed.
    p.fd = open_stream_socket(p.target->address);
    if (!p.fd) {
        // Out of fds or memory here: no verdict on the member. Try again next time.
        int err = errno;
        if (local_errors_.allow(Clock::now()))
            owner_.log_.warn("health: route \"{}\" upstream {}: check skipped, cannot open a "
                             "socket: {}{}",
                             p.target->route, p.target->member, describe_errno(err),
                             local_errors_.suppressed() > 0
                                 ? fmt::format(" ({} more skipped)", local_errors_.suppressed())
                                 : std::string());
        schedule(p, p.interval);
        return;
    }
    submit_step(p, Step::Connect);
}

void HealthChecker::Loop::submit_step(Probe& p, Step step) {
    p.step = step;
    // The check's one timeout bounds all its steps: each gets what is left of it.
    auto left = p.deadline - Clock::now();
    if (left <= Clock::duration::zero()) {
        p.result = -ECANCELED;
        p.timed_out = true;
        on_step_done(p);
        return;
    }
    p.pending = 2;
    p.op_done = false;
    p.timed_out = false;
    p.result = 0;
    in_flight_ += 2;
    const HealthCheck& check = p.target->check;
    // The operation and its LINK_TIMEOUT must reach the kernel in one submission, or
    // the timeout is lost and the operation unbounded (docs/kernel.md §3,
    // Ring::reserve()). The timeout guards the operation before it: whichever ends
    // first cancels the other, so both always complete. Send and receive run inline on
    // this thread, waiting in io_uring's internal poll (docs/kernel.md §8).
    ring_.reserve(2);
    switch (step) {
    case Step::Connect:
        ring_.connect(p.fd.get(), p.target->address.get(), p.target->address.length,
                      tag(Op::Connect, p.index), uring::Link::Soft);
        break;
    case Step::Send:
        // MSG_NOSIGNAL: a member that reset the connection must not SIGPIPE the engine.
        ring_.send(p.fd.get(), check.send.data() + p.sent, check.send.size() - p.sent, MSG_NOSIGNAL,
                   tag(Op::Send, p.index), uring::Link::Soft);
        break;
    case Step::Recv:
        ring_.recv(p.fd.get(), p.reply.data() + p.received, p.reply.size() - p.received, 0,
                   tag(Op::Recv, p.index), uring::Link::Soft);
        break;
    case Step::Idle:
    case Step::Waiting:
        break;
    }
    ring_.link_timeout(left, tag(Op::StepTimeout, p.index));
}

void HealthChecker::Loop::finish_check(Probe& p, const std::string* failure) {
    p.fd.reset();
    p.step = Step::Idle;
    Published& pub = *p.published;
    const HealthTarget& t = *p.target;
    pub.checks.fetch_add(1, std::memory_order_relaxed);
    if (failure != nullptr)
        pub.failures.fetch_add(1, std::memory_order_relaxed);

    // The counters first, then `up` with release: whoever reads the new state through
    // stats() (acquire) also sees the checks that led to it.
    switch (p.rules.record(failure == nullptr)) {
    case RiseFall::Change::WentDown:
        pub.transitions.fetch_add(1, std::memory_order_relaxed);
        pub.up.store(false, std::memory_order_release);
        owner_.log_.warn("health: route \"{}\" upstream {} is down ({} check{} failed: {})",
                         t.route, t.member, p.rules.streak(), p.rules.streak() == 1 ? "" : "s",
                         *failure);
        break;
    case RiseFall::Change::WentUp:
        pub.transitions.fetch_add(1, std::memory_order_relaxed);
        pub.up.store(true, std::memory_order_release);
        owner_.log_.info("health: route \"{}\" upstream {} is up ({} check{} passed)", t.route,
                         t.member, p.rules.streak(), p.rules.streak() == 1 ? "" : "s");
        break;
    case RiseFall::Change::None:
        if (failure != nullptr)
            owner_.log_.debug("health: route \"{}\" upstream {}: check failed: {}", t.route,
                              t.member, *failure);
        break;
    }
    // Checks start `interval` apart, not `interval` after the previous one ended.
    schedule(p, p.started + p.interval - Clock::now());
}

void HealthChecker::Loop::schedule(Probe& p, Clock::duration delay) {
    if (delay <= Clock::duration::zero()) {
        begin_check(p);
        return;
    }
    p.step = Step::Waiting;
    ring_.timeout(delay, tag(Op::Timer, p.index));
    ++in_flight_;
}

void HealthChecker::Loop::begin_stop() {
    stopping_ = true;
    for (Probe& p : probes_) {
        uint64_t target = 0;
        if (p.step == Step::Waiting)
            target = tag(Op::Timer, p.index);
        else if (p.pending > 0 && !p.op_done)
            target = tag(p.step == Step::Connect ? Op::Connect
                         : p.step == Step::Send  ? Op::Send
                                                 : Op::Recv,
                         p.index);
        else if (p.pending > 0)
            target = tag(Op::StepTimeout, p.index); // about to complete anyway
        else
            continue;
        // Cancelling the operation fails its linked timeout too (-ECANCELED).
        ring_.cancel(target, tag(Op::Cancel, p.index));
        ++in_flight_;
    }
}

// ---------------------------------------------------------------- HealthChecker

HealthChecker::HealthChecker(std::vector<HealthTarget> targets, Logger log)
    : targets_(std::move(targets)), log_(std::move(log)),
      published_(std::make_unique<Published[]>(targets_.size())) {
    for (std::size_t i = 0; i < targets_.size(); ++i)
        published_[i].up.store(targets_[i].initially_up, std::memory_order_relaxed);
}

HealthChecker::~HealthChecker() {
    stop();
}

void HealthChecker::start() {
    std::lock_guard lock(lifecycle_mu_);
    if (started_)
        throw std::logic_error("HealthChecker::start() called twice");
    started_ = true;
    wake_fd_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!wake_fd_)
        throw std::runtime_error(fmt::format("health checks: eventfd: {}", std::strerror(errno)));
    std::promise<void> ready;
    std::future<void> set_up = ready.get_future();
    thread_ = std::thread([this, &ready] { run(ready); });
    try {
        set_up.get();
    } catch (...) {
        thread_.join();
        throw;
    }
}

void HealthChecker::run(std::promise<void>& ready) {
    // Shows in top -H and /proc/PID/task/*/comm.
    pthread_setname_np(pthread_self(), "fwd-health");
    std::unique_ptr<Loop> loop;
    try {
        loop = std::make_unique<Loop>(*this);
    } catch (...) {
        ready.set_exception(std::current_exception());
        return;
    }
    ready.set_value(); // `ready` is gone once start() returns: not touched again
    loop->run();
}

void HealthChecker::stop() {
    std::lock_guard lock(lifecycle_mu_);
    if (!thread_.joinable())
        return;
    uint64_t one = 1;
    // Cannot fail in a way worth handling: the counter only saturates after 2^64 - 1.
    [[maybe_unused]] ssize_t n = ::write(wake_fd_.get(), &one, sizeof(one));
    thread_.join();
}

HealthChecker::TargetStats HealthChecker::stats(std::size_t target) const {
    const Published& p = published_[target];
    return TargetStats{
        .up = p.up.load(std::memory_order_acquire), // see finish_check()
        .checks = p.checks.load(std::memory_order_relaxed),
        .failures = p.failures.load(std::memory_order_relaxed),
        .transitions = p.transitions.load(std::memory_order_relaxed),
    };
}

} // namespace uringfwd::engine
