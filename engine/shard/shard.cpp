// A shard's loop and dispatch: submit and wait, hand each completion to the owner its
// tag names, and stop. Setting up is in shard_setup.cpp, letting clients in in
// shard_admission.cpp, changes in shard_reload.cpp, hand-overs in shard_handoff.cpp.
#include "shard/shard.hpp"

#include "support/plural.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace uringfwd::engine {

namespace {

// How often a shard looks at its leaving connections (a hand-over, moves) when nothing
// else wakes it: a hold let go or a move given up is this late at most.
constexpr std::chrono::milliseconds kLeaveTick{50};

} // namespace

Shard::Shard(ShardSetup setup, Logger logger)
    : setup_(std::move(setup)), config_(*setup_.config), log_(std::move(logger)),
      wake_fd_(setup_.doorbells->fd(static_cast<std::size_t>(setup_.index))) {}

Shard::~Shard() {
    mailbox_.close(); // a shard that never ran still owns what was handed to it
}

void Shard::request_stop(std::chrono::milliseconds drain) {
    drain_ms_.store(drain.count(), std::memory_order_release);
    stop_requested_.store(true, std::memory_order_release);
    wake();
}

void Shard::wake() {
    setup_.doorbells->ring(static_cast<std::size_t>(setup_.index));
}

void Shard::run(std::promise<void>& ready) {
    try {
        setup();
    } catch (...) {
        mailbox_.close();
        finished_.store(true, std::memory_order_release);
        ready.set_exception(std::current_exception());
        return;
    }
    ready.set_value();
    serve();
    mailbox_.close(); // what came too late is refused, or dropped (a hand-over reset)
    finished_.store(true, std::memory_order_release);
}

// ---------------------------------------------------------------- the loop

void Shard::serve() {
    for (auto& listener : listeners_)
        listener->start();
    io_->poll(in_flight_, OpTag::for_shard(Op::Wake), uring::FileRef::plain(wake_fd_), POLLIN);
    context_->now = std::chrono::steady_clock::now();
    arm_idle_sweep();

    while (!done_serving()) {
        std::span<const uring::Completion> batch = io_->submit_and_wait(config_.ring.busy_poll);
        context_->now = std::chrono::steady_clock::now();
        for (const uring::Completion& c : batch)
            dispatch(c);
        after_batch();
    }
    listeners_.clear();
    log_.debug("stopped");
}

void Shard::after_batch() {
    connections_->after_batch();
    if (connections_->has_leaving() && !leave_tick_armed_) {
        // A connection waiting to be quiet, or a move waiting for its time limit, may
        // have nothing else that completes on this shard.
        io_->timeout(in_flight_, OpTag::for_shard(Op::LeaveTick), kLeaveTick);
        leave_tick_armed_ = true;
    }
    if (!retired_routes_.empty())
        prune_retired_routes();
    finish_when_idle();
    log_pool_notices();
    io_->publish_counters();
    const pipes::PoolCounters& p = pool_->counters();
    set(counters_.pipes_created, p.created);
    set(counters_.pipes_leased, p.leased_now);
    set(counters_.pipes_closed_dirty, p.closed_dirty);
    set(counters_.pipe_size_reductions, p.size_reductions);
    if (buffers_)
        set(counters_.buffers_out, buffers_->out() + (bulk_buffers_ ? bulk_buffers_->out() : 0));
}

bool Shard::done_serving() const {
    if (!stopping_ || connections_->active() > 0 || !in_flight_.idle() ||
        !connections_->directions().in_flight().idle())
        return false;
    for (const auto& listener : listeners_)
        if (!listener->in_flight().idle())
            return false;
    return true;
}

void Shard::log_pool_notices() {
    for (const std::string& notice : pool_->take_notices())
        log_.warn("{}", notice);
}

// Every switch below names every Op, without a default, so -Wswitch finds an operation
// added without a handler; what is not its owner's is refused with a log line.
void Shard::dispatch(const uring::Completion& c) {
    OpTag t = OpTag::decode(c.user_data);
    switch (t.owner) {
    case Owner::Connection:
        connections_->on_completion(t, c);
        return;
    case Owner::Listener:
        on_listener_op(t, c);
        return;
    case Owner::Shard:
        on_shard_op(t, c);
        return;
    }
    log_.error("completion with an unknown owner kind {} (op {})", static_cast<int>(t.owner),
               static_cast<int>(t.op));
}

void Shard::on_shard_op(const OpTag& t, const uring::Completion& c) {
    switch (t.op) {
    case Op::PipeRetry:
    case Op::PipeRetryCancel:
    case Op::CoalesceTick: {
        Directions& directions = connections_->directions();
        io_->completed(directions.in_flight(), t, c);
        if (t.op == Op::PipeRetry)
            directions.on_retry_timer(); // waiters are resumed after every batch
        else if (t.op == Op::CoalesceTick)
            directions.on_coalesce_tick(); // so are the coalescing directions
        return;
    }
    case Op::Wake:
        io_->completed(in_flight_, t, c);
        on_wake(c.result);
        return;
    case Op::DrainDeadline:
        io_->completed(in_flight_, t, c);
        drain_timer_armed_ = false;
        if (c.result == -ETIME)
            connections_->close_all(CloseReason::DrainTimeout);
        return;
    case Op::LeaveTick:
        io_->completed(in_flight_, t, c);
        leave_tick_armed_ = false; // after_batch() looks at the leaving connections
        return;
    case Op::IdleSweep:
        io_->completed(in_flight_, t, c);
        idle_sweep_armed_ = false;
        if (c.result == -ETIME) {
            connections_->close_idle();
            arm_idle_sweep();
        }
        return;
    case Op::ShardCancel:
    case Op::ShardCloseFile:
        io_->completed(in_flight_, t, c);
        return;
    // A listener's or a connection's operation: never tagged for the shard.
    case Op::Accept:
    case Op::AcceptPause:
    case Op::AcceptReady:
    case Op::ListenerCancel:
    case Op::ListenerCloseFile:
    case Op::InspectRecv:
    case Op::InspectTimeout:
    case Op::Connect:
    case Op::ConnectTimeout:
    case Op::Preamble:
    case Op::PollIn:
    case Op::PollOut:
    case Op::SpliceIn:
    case Op::SpliceOut:
    case Op::Drain:
    case Op::Recv:
    case Op::Send:
    case Op::ErrorWatch:
    case Op::Cancel:
    case Op::Socket:
    case Op::SocketOpt:
    case Op::CloseFile:
    case Op::HalfClose:
    case Op::InstallFd:
    case Op::MemberWait:
    case Op::SocketControl:
    case Op::MoveIntoSlots:
    case Op::Count:
        break;
    }
    log_.error("completion with operation {}, which is not the shard's", static_cast<int>(t.op));
}

void Shard::on_listener_op(const OpTag& t, const uring::Completion& c) {
    if (t.index >= listeners_.size()) {
        log_.error("completion for listener {}, which does not exist", t.index);
        return;
    }
    Listener& listener = *listeners_[t.index];
    switch (t.op) {
    case Op::Accept:
        io_->completed(listener.in_flight(), t, c);
        if (int fd = listener.on_accept(c, connections_->active()); fd >= 0)
            open_connection(listener, fd);
        listener.keep_accepting();
        return;
    case Op::AcceptReady:
        io_->completed(listener.in_flight(), t, c);
        listener.on_ready(c);
        if (c.result >= 0 && !stopping_)
            accept_waiting(listener);
        listener.keep_accepting();
        return;
    case Op::AcceptPause:
        io_->completed(listener.in_flight(), t, c);
        listener.on_pause_over();
        return;
    case Op::ListenerCancel:
    case Op::ListenerCloseFile: // a client accepted after stop(), closed unserved
        io_->completed(listener.in_flight(), t, c);
        return;
    // The shard's or a connection's operation: never tagged for a listener.
    case Op::Wake:
    case Op::PipeRetry:
    case Op::PipeRetryCancel:
    case Op::CoalesceTick:
    case Op::DrainDeadline:
    case Op::IdleSweep:
    case Op::LeaveTick:
    case Op::ShardCancel:
    case Op::ShardCloseFile:
    case Op::InspectRecv:
    case Op::InspectTimeout:
    case Op::Connect:
    case Op::ConnectTimeout:
    case Op::Preamble:
    case Op::PollIn:
    case Op::PollOut:
    case Op::SpliceIn:
    case Op::SpliceOut:
    case Op::Drain:
    case Op::Recv:
    case Op::Send:
    case Op::ErrorWatch:
    case Op::Cancel:
    case Op::Socket:
    case Op::SocketOpt:
    case Op::CloseFile:
    case Op::HalfClose:
    case Op::InstallFd:
    case Op::MemberWait:
    case Op::SocketControl:
    case Op::MoveIntoSlots:
    case Op::Count:
        break;
    }
    log_.error("completion with operation {}, which is not a listener's", static_cast<int>(t.op));
}

void Shard::arm_idle_sweep() {
    if (idle_sweep_.count() > 0 && !stopping_ && !idle_sweep_armed_) {
        io_->timeout(in_flight_, OpTag::for_shard(Op::IdleSweep), idle_sweep_);
        idle_sweep_armed_ = true;
    }
}

// ---------------------------------------------------------------- stopping

void Shard::on_wake(int result) {
    if (result < 0)
        return; // cancelled: the shard is finishing
    uint64_t value = 0;
    [[maybe_unused]] ssize_t n = ::read(wake_fd_, &value, sizeof(value));
    mailbox_.run(); // changes, calls, hand-overs
    // Perhaps another shard gave room back at a limit this shard waits at.
    resume_all();
    if (stop_requested_.load(std::memory_order_acquire))
        stop_now();
    // Listen for a further request (a change, a second SIGTERM shortening the drain),
    // unless the shard is finishing: finish_when_idle() has withdrawn the wake-up poll
    // for good, and a poll armed now would never be cancelled, so the loop would never
    // end. That happens when the eventfd was written again (a call(), a second stop)
    // and the poll fired before its cancel reached it: the cancel finds nothing and
    // this completion comes after it.
    if (!final_cancels_sent_)
        io_->poll(in_flight_, OpTag::for_shard(Op::Wake), uring::FileRef::plain(wake_fd_), POLLIN);
}

void Shard::stop_now() {
    begin_stop();
    auto drain = std::chrono::milliseconds(drain_ms_.load(std::memory_order_acquire));
    if (drain.count() <= 0) {
        connections_->close_all(CloseReason::Stopped);
        return;
    }
    // The drain's one deadline runs from the stop, whether or not the shard holds a
    // connection now (one may come back to it later, keep_drain_deadline()).
    if (drain_deadline_ == std::chrono::steady_clock::time_point{}) {
        drain_deadline_ = context_->now + drain;
        if (connections_->active() > 0)
            log_.info("stopping: waiting up to {} ms for {} to finish", drain.count(),
                      count_of(connections_->active(), "connection"));
    }
    if (connections_->active() > 0)
        keep_drain_deadline();
}

void Shard::keep_drain_deadline() {
    auto drain = std::chrono::milliseconds(drain_ms_.load(std::memory_order_acquire));
    if (drain_timer_armed_ || drain.count() <= 0)
        return; // its timer runs already, or there is no drain (stop_now closed all)
    // One deadline for the whole stop, set by stop_now(): a later request with a drain
    // (a second SIGTERM has none: stop_now resets everything), or a connection carried
    // on after the timer fired (one a successor refused or never took), does not start
    // another.
    if (drain_deadline_ == std::chrono::steady_clock::time_point{})
        drain_deadline_ = context_->now + drain; // stop_now() sets it first; in case not
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(drain_deadline_ - context_->now);
    if (left.count() <= 0) {
        connections_->close_all(CloseReason::DrainTimeout);
        return;
    }
    drain_timer_armed_ = true;
    io_->timeout(in_flight_, OpTag::for_shard(Op::DrainDeadline), left);
}

void Shard::begin_stop() {
    if (stopping_)
        return;
    stopping_ = true;
    for (auto& listener : listeners_)
        listener->stop();
    connections_->directions().stop();
    connections_->stop_moves();
    // Clients still waiting for room are refused: the engine takes no new connection.
    // Each is reset and closed as it is dropped (UnservedSocket).
    for (auto* routes : {&routes_, &retired_routes_}) {
        for (auto& route : *routes) {
            for (const WaitingClient& client : route->waiting)
                if (client.units.fd)
                    fd_connections_->give_back(); // the engine is stopping: none to wake
            route->waiting.clear();
            route->stop_wanting();
        }
    }
    if (idle_sweep_armed_)
        io_->cancel(in_flight_, OpTag::for_shard(Op::IdleSweep), OpTag::for_shard(Op::ShardCancel));
}

void Shard::finish_when_idle() {
    if (!stopping_ || final_cancels_sent_ || connections_->active() > 0 ||
        connections_->handing_over() || held_open_)
        return;
    // Every connection is gone: withdraw the wake-up poll and any drain deadline, and
    // the loop ends once their completions are in.
    final_cancels_sent_ = true;
    io_->cancel(in_flight_, OpTag::for_shard(Op::Wake), OpTag::for_shard(Op::ShardCancel));
    if (drain_timer_armed_)
        io_->cancel(in_flight_, OpTag::for_shard(Op::DrainDeadline),
                    OpTag::for_shard(Op::ShardCancel));
}

} // namespace uringfwd::engine
