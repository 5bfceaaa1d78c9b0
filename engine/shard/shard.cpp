#include "shard/shard.hpp"

#include "net/sockets.hpp"
#include "platform/cpu_affinity.hpp"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace uringfwd::engine {

namespace {
// The shard's one provided-buffer group (buffer groups are per ring).
constexpr uint16_t kCopyBufferGroup = 0;
} // namespace

Shard::Shard(ShardSetup setup, Logger logger)
    : setup_(std::move(setup)), config_(*setup_.config), log_(std::move(logger)),
      wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    if (!wake_fd_)
        throw std::runtime_error(fmt::format("eventfd: {}", std::strerror(errno)));
}

Shard::~Shard() {
    refuse_handoffs(); // a shard that never ran still owns what was handed to it
}

void Shard::request_stop(std::chrono::milliseconds drain) {
    drain_ms_.store(drain.count(), std::memory_order_release);
    stop_requested_.store(true, std::memory_order_release);
    wake();
}

void Shard::wake() {
    uint64_t one = 1;
    // Cannot fail in a way worth handling: the counter only saturates after 2^64 - 1.
    [[maybe_unused]] ssize_t n = ::write(wake_fd_.get(), &one, sizeof(one));
}

void Shard::run(std::promise<void>& ready) {
    try {
        setup();
    } catch (...) {
        finished_.store(true, std::memory_order_release);
        ready.set_exception(std::current_exception());
        return;
    }
    ready.set_value();
    serve();
    finished_.store(true, std::memory_order_release);
}

// ---------------------------------------------------------------- setup

void Shard::setup() {
    counters_.thread_id.store(static_cast<int>(::syscall(SYS_gettid)), std::memory_order_relaxed);
    // Shows in top -H, perf and /proc/PID/task/*/comm (15 characters at most).
    pthread_setname_np(pthread_self(), fmt::format("fwd-shard-{}", setup_.index).c_str());
    if (setup_.cpu >= 0) {
        if (int err = pin_current_thread(setup_.cpu); err != 0)
            throw std::runtime_error(fmt::format("cannot pin shard {} to CPU {}: {}", setup_.index,
                                                 setup_.cpu, std::strerror(err)));
    }
    // Everything below is allocated on the shard's own thread, after pinning: the ring
    // must be created by its only submitter (SINGLE_ISSUER, DEFER_TASKRUN), and pages
    // are first touched by the CPU (so the NUMA node) that will use them.
    setup_ring();
    pool_ = std::make_unique<pipes::PipePool>(config_.max_pipes, config_.pipe_size);
    setup_buffers();
    context_ = std::make_unique<ShardContext>(
        ShardContext{*io_, *pool_, buffers_.get(), data_path_, config_, log_, setup_.index});
    for (const Route& route : setup_.routes->routes)
        routes_.push_back(std::make_unique<ShardRoute>(route, setup_.routes, setup_.shards));
    plan_idle_sweep();
    connections_ =
        std::make_unique<Connections>(*context_, [this](ShardRoute& route) { on_room(route); });
    for (const ListenerSetup& ls : setup_.listeners) {
        listeners_.push_back(std::make_unique<Listener>(*io_, log_, ls));
        bound_.push_back(listeners_.back()->bound());
        listener_fds_.push_back(listeners_.back()->fd());
    }

    // Probe the pipe size now, so the start-up line tells the truth and any budget
    // refusal shows up at once rather than on the first connection. The copy path
    // needs no pipe at all.
    if (data_path_ != DataPath::Copy) {
        if (auto pipe = pool_->lease())
            pool_->give_back(std::move(*pipe));
    }
    std::string copy_buffers = buffers_ ? fmt::format(", {} copy buffers of {} bytes",
                                                      buffers_->count(), buffers_->buffer_size())
                                        : std::string();
    std::string busy_poll = config_.busy_poll.count() > 0
                                ? fmt::format(", busy-poll {} us", config_.busy_poll.count())
                                : std::string();
    description_ = fmt::format(
        "cpu {}, data path {}, pipes {} bytes (at most {}){}, steering {}{}, {}", setup_.cpu,
        to_string(data_path_), pool_->pipe_size(), pool_->max_pipes(), copy_buffers,
        listeners_.front()->steering(), busy_poll, io_->ring().features().describe());
    log_pool_notices();
}

void Shard::setup_ring() {
    io_ = std::make_unique<ShardIo>(config_.ring_entries, counters_);
    uring::Ring& ring = io_->ring();
    if (!setup_.worker_cpus.empty()) {
        // io-wq workers run the splices; one on another CPU than the shard costs 2.3 to
        // 2.9 times as much per splice (docs/kernel.md §1.7). Refusal is not fatal (a cpuset may
        // exclude the mask since 6.12): workers then run where the kernel likes.
        if (int rc = ring.set_worker_affinity(setup_.worker_cpus); rc < 0)
            log_.warn("io-wq affinity refused ({}); workers may run on any CPU",
                      std::strerror(-rc));
    }
    // Cap the unbounded io-wq pool (where socket and pipe splices go). Every splice we
    // submit is non-blocking, and at most one runs per leased pipe (a hard-linked pair
    // runs back to back on one worker), so max_pipes workers can never starve a ready
    // splice (docs/kernel.md §1.4); the cap only guards against a kernel that blocks
    // anyway, which would otherwise grow one thread per idle connection (§1.3).
    unsigned workers = config_.iowq_max_workers != 0 ? config_.iowq_max_workers
                                                     : static_cast<unsigned>(config_.max_pipes) + 4;
    ring.set_worker_limits(0, workers);
}

void Shard::setup_buffers() {
    data_path_ = config_.data_path;
    if (data_path_ == DataPath::Splice)
        return;
    try {
        buffers_ = std::make_unique<uring::ProvidedBuffers>(
            io_->ring(), kCopyBufferGroup, config_.copy_buffers, config_.copy_buffer_size);
    } catch (const uring::RingError& e) {
        if (data_path_ == DataPath::Copy)
            throw std::runtime_error(fmt::format("data path copy: {}", e.what()));
        log_.warn("{}: forwarding with splice only", e.what());
        data_path_ = DataPath::Splice;
    }
}

// ---------------------------------------------------------------- the loop

void Shard::serve() {
    for (auto& listener : listeners_)
        listener->start();
    io_->poll(in_flight_, OpTag::for_shard(Op::Wake), wake_fd_.get(), POLLIN);
    context_->now = std::chrono::steady_clock::now();
    arm_idle_sweep();

    while (!done_serving()) {
        std::span<const uring::Completion> batch = io_->submit_and_wait(config_.busy_poll);
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
        set(counters_.buffers_out, buffers_->out());
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

void Shard::dispatch(const uring::Completion& c) {
    OpTag t = OpTag::decode(c.user_data);
    if (!t.for_shard()) {
        connections_->on_completion(t, c);
        return;
    }
    switch (t.op) {
    case Op::Accept:
    case Op::AcceptPause:
    case Op::ListenerCancel:
        on_listener_op(t, c);
        break;
    case Op::PipeRetry:
    case Op::PipeRetryCancel: {
        Directions& directions = connections_->directions();
        io_->completed(directions.in_flight(), t, c);
        if (t.op == Op::PipeRetry)
            directions.on_retry_timer(); // waiters are resumed after every batch
        break;
    }
    case Op::Wake:
        io_->completed(in_flight_, t, c);
        on_wake(c.result);
        break;
    case Op::DrainDeadline:
        io_->completed(in_flight_, t, c);
        drain_timer_armed_ = false;
        if (c.result == -ETIME)
            connections_->close_all(CloseReason::DrainTimeout);
        break;
    case Op::IdleSweep:
        io_->completed(in_flight_, t, c);
        idle_sweep_armed_ = false;
        if (c.result == -ETIME) {
            connections_->close_idle();
            arm_idle_sweep();
        }
        break;
    case Op::ShardCancel:
        io_->completed(in_flight_, t, c);
        break;
    default:
        log_.error("completion with unknown shard operation {}", static_cast<int>(t.op));
    }
}

void Shard::on_listener_op(const OpTag& t, const uring::Completion& c) {
    if (t.index() >= listeners_.size()) {
        log_.error("completion for listener {}, which does not exist", t.index());
        return;
    }
    Listener& listener = *listeners_[t.index()];
    io_->completed(listener.in_flight(), t, c);
    if (t.op == Op::Accept) {
        if (int fd = listener.on_accept(c, connections_->active()); fd >= 0)
            open_connection(listener, fd);
        listener.keep_accepting();
    } else if (t.op == Op::AcceptPause) {
        listener.on_pause_over();
    }
}

void Shard::open_connection(Listener& listener, int client_fd) {
    ShardRoute& route = *routes_[listener.route()];
    admit(route, {client_fd, listener.is_tcp(), {}, -1});
}

void Shard::admit(ShardRoute& route, WaitingClient client) {
    if (route.full() || !route.waiting.empty()) {
        // At the route's limit: the client waits, holding nothing but its socket, and
        // the route's listeners stop taking more (those wait in the backlog).
        route.waiting.push_back(std::move(client));
    } else {
        open(route, std::move(client));
    }
    if (route.full() && !route.held) {
        route.held = true;
        for_listeners_of(route, [](Listener& each) { each.hold(); });
    }
}

void Shard::open(ShardRoute& route, WaitingClient client) {
    int err = connections_->open(client.fd, client.is_tcp, route, std::move(client.preamble),
                                 client.upstream_fd);
    if (err == 0) {
        for (auto& each : listeners_)
            each->shortage_over();
    } else if (is_fd_shortage(err)) {
        // Every listener shares the process's fd table: all of them pause.
        for (auto& each : listeners_)
            each->pause_for_fd_shortage("upstream socket", err, connections_->active());
    }
}

// A connection of `route` has gone: let waiting clients in, then the listeners.
void Shard::on_room(ShardRoute& route) {
    if (stopping_)
        return;
    while (!route.full() && !route.waiting.empty()) {
        WaitingClient next = std::move(route.waiting.front());
        route.waiting.pop_front();
        open(route, std::move(next));
    }
    if (route.held && !route.full()) {
        route.held = false;
        for_listeners_of(route, [](Listener& each) { each.release_hold(); });
    }
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
    [[maybe_unused]] ssize_t n = ::read(wake_fd_.get(), &value, sizeof(value));
    take_change();
    take_handoffs();
    if (stop_requested_.load(std::memory_order_acquire))
        stop_now();
    // Listen for a further request (a change, a second SIGTERM shortening the drain).
    io_->poll(in_flight_, OpTag::for_shard(Op::Wake), wake_fd_.get(), POLLIN);
}

void Shard::stop_now() {
    begin_stop();
    auto drain = std::chrono::milliseconds(drain_ms_.load(std::memory_order_acquire));
    if (drain.count() <= 0) {
        connections_->close_all(CloseReason::Stopped);
    } else if (connections_->active() > 0 && !drain_timer_armed_) {
        // A later request with a drain keeps the first deadline; one with none resets
        // everything at once (above).
        drain_timer_armed_ = true;
        io_->timeout(in_flight_, OpTag::for_shard(Op::DrainDeadline), drain);
        log_.info("stopping: waiting up to {} ms for {} connections to finish", drain.count(),
                  connections_->active());
    }
}

void Shard::begin_stop() {
    if (stopping_)
        return;
    stopping_ = true;
    for (auto& listener : listeners_)
        listener->stop();
    connections_->directions().stop();
    refuse_handoffs();
    // Clients still waiting for room are refused: the engine takes no new connection.
    for (auto* routes : {&routes_, &retired_routes_}) {
        for (auto& route : *routes) {
            for (const WaitingClient& client : route->waiting) {
                for (int fd : {client.fd, client.upstream_fd}) {
                    if (fd >= 0) {
                        set_reset_on_close(fd);
                        ::close(fd);
                    }
                }
            }
            route->waiting.clear();
        }
    }
    if (idle_sweep_armed_)
        io_->cancel(in_flight_, OpTag::for_shard(Op::IdleSweep), OpTag::for_shard(Op::ShardCancel));
}

void Shard::finish_when_idle() {
    if (!stopping_ || final_cancels_sent_ || connections_->active() > 0)
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
