// The checker thread: each target's check, step by step, through its own ring.
#include "health/health_loop.hpp"

#include "net/sockets.hpp"
#include "support/quote_input.hpp"

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

using namespace health_detail;
using namespace std::chrono_literals;

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
    if (p.published->paused.load(std::memory_order_relaxed)) {
        // In maintenance: no probe reaches the member. Looked at again each interval,
        // so the checks resume within one of set_paused(false).
        schedule(p, p.interval);
        return;
    }
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
            owner_.log_.warn("route \"{}\" upstream {}: check skipped, cannot open a "
                             "socket: {}{}",
                             p.target->route, p.target->member, describe_errno(err),
                             suppressed_note(local_errors_.suppressed()));
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
        owner_.log_.warn("route \"{}\" upstream {} is down ({} check{} failed: {})", t.route,
                         t.member, p.rules.streak(), p.rules.streak() == 1 ? "" : "s", *failure);
        if (owner_.on_change_)
            owner_.on_change_(p.index, false);
        break;
    case RiseFall::Change::WentUp:
        pub.transitions.fetch_add(1, std::memory_order_relaxed);
        pub.up.store(true, std::memory_order_release);
        owner_.log_.info("route \"{}\" upstream {} is up ({} check{} passed)", t.route, t.member,
                         p.rules.streak(), p.rules.streak() == 1 ? "" : "s");
        if (owner_.on_change_)
            owner_.on_change_(p.index, true);
        break;
    case RiseFall::Change::None:
        if (failure != nullptr)
            owner_.log_.debug("route \"{}\" upstream {}: check failed: {}", t.route, t.member,
                              *failure);
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

} // namespace uringfwd::engine
