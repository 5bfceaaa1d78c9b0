#include "shard.hpp"

#include "cpu_affinity.hpp"
#include "shard_counter.hpp"
#include "sockets.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace uringfwd::engine {

namespace {

std::string suppressed_note(uint64_t suppressed) {
    return suppressed == 0 ? std::string()
                           : fmt::format(" ({} similar failures not logged)", suppressed);
}

// Accepting fails with these when the process or system is out of file descriptors
// or memory; the pending connections stay in the backlog, so pausing and retrying
// loses nothing.
bool is_resource_shortage(int err) {
    return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
}

constexpr std::chrono::milliseconds kFirstAcceptBackoff{20};
constexpr std::chrono::milliseconds kMaxAcceptBackoff{1000};
constexpr std::chrono::milliseconds kPipeRetryDelay{50};
constexpr int kListenBacklog = 4096;

// Both splices of a pair and every drain are non-blocking: the sockets are
// O_NONBLOCK and the pipes too, and SPLICE_F_NONBLOCK covers Unix sources, which
// honour only the flag (kernel-notes.md §2.1). None of them can park an io-wq thread.
constexpr unsigned kSpliceFlags = SPLICE_F_NONBLOCK;

// The shard's one provided-buffer group (buffer groups are per ring).
constexpr uint16_t kCopyBufferGroup = 0;

} // namespace

void ShardCounters::add_to(EngineStats& t) const {
    auto get = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
    t.accepted += get(accepted);
    t.active += get(active);
    t.upstream_failures += get(upstream_failures);
    t.bytes_to_upstream += get(bytes_to_upstream);
    t.bytes_to_client += get(bytes_to_client);
    t.splices += get(splices);
    t.short_splices += get(short_splices);
    t.eagains += get(eagains);
    t.enters += get(enters);
    t.completions += get(completions);
    t.pipes_created += get(pipes_created);
    t.pipes_leased += get(pipes_leased);
    t.pipes_closed_dirty += get(pipes_closed_dirty);
    t.pipe_size_reductions += get(pipe_size_reductions);
    t.pipe_waits += get(pipe_waits);
    t.accept_backoffs += get(accept_backoffs);
    t.copy_receives += get(copy_receives);
    t.copy_sends += get(copy_sends);
    t.buffers_out += get(buffers_out);
    t.buffer_waits += get(buffer_waits);
    t.switches_to_splice += get(switches_to_splice);
    t.switches_to_copy += get(switches_to_copy);
}

Shard::Shard(ShardSetup setup, Logger logger)
    : setup_(std::move(setup)), config_(*setup_.config), log_(std::move(logger)),
      wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    if (!wake_fd_)
        throw std::runtime_error(fmt::format("eventfd: {}", std::strerror(errno)));
    upstream_is_tcp_ = setup_.upstream.family() != AF_UNIX;
    client_is_tcp_ = setup_.listen.family() != AF_UNIX;
}

Shard::~Shard() = default;

void Shard::request_stop(std::chrono::milliseconds drain) {
    drain_ms_.store(drain.count(), std::memory_order_release);
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
    ring_ = std::make_unique<uring::Ring>(config_.ring_entries);
    if (!setup_.worker_cpus.empty()) {
        // io-wq workers run the splices; one on another CPU than the shard costs about
        // 3x per splice (kernel-notes.md §1.7, p11). Refusal is not fatal (a cpuset
        // may exclude the mask since 6.12): workers then run where the kernel likes.
        if (int rc = ring_->set_worker_affinity(setup_.worker_cpus); rc < 0)
            log_.warn("io-wq affinity refused ({}); workers may run on any CPU",
                      std::strerror(-rc));
    }
    // Cap the unbounded io-wq pool (where socket and pipe splices go). Every splice we
    // submit is non-blocking, and at most one runs per leased pipe (a hard-linked pair
    // runs back to back on one worker), so max_pipes workers can never starve a ready
    // splice (kernel-notes.md §1.4); the cap only guards against a kernel that blocks
    // anyway, which would otherwise grow one thread per idle connection (§1.3).
    unsigned workers = config_.iowq_max_workers != 0 ? config_.iowq_max_workers
                                                     : static_cast<unsigned>(config_.max_pipes) + 4;
    ring_->set_worker_limits(0, workers);

    pool_ = std::make_unique<pipes::PipePool>(config_.max_pipes, config_.pipe_size);
    data_path_ = config_.data_path;
    if (data_path_ != DataPath::Splice) {
        try {
            buffers_ = std::make_unique<uring::ProvidedBuffers>(
                *ring_, kCopyBufferGroup, config_.copy_buffers, config_.copy_buffer_size);
        } catch (const uring::RingError& e) {
            if (data_path_ == DataPath::Copy)
                throw std::runtime_error(fmt::format("data path copy: {}", e.what()));
            log_.warn("{}: forwarding with splice only", e.what());
            data_path_ = DataPath::Splice;
        }
    }
    if (setup_.shared_listener >= 0) {
        listener_.reset(::fcntl(setup_.shared_listener, F_DUPFD_CLOEXEC, 0));
        if (!listener_)
            throw std::runtime_error(fmt::format("dup listener: {}", std::strerror(errno)));
    } else {
        listener_ = open_listener(setup_.listen, /*reuse_port=*/true, kListenBacklog);
    }
    bound_ = local_address(listener_.get());
    std::string steering = "kernel hash";
    if (setup_.set_incoming_cpu && setup_.cpu >= 0) {
        if (int err = set_incoming_cpu(listener_.get(), setup_.cpu); err != 0)
            log_.warn("SO_INCOMING_CPU: {}", std::strerror(err));
        else
            steering = "incoming cpu";
    }
    if (setup_.steering_base) {
        if (int err = attach_cpu_steering(listener_.get(), *setup_.steering_base); err != 0)
            log_.warn("cannot attach the reuseport CPU steering program ({}); connections "
                      "are spread by the kernel's hash",
                      std::strerror(err));
        else
            steering = "incoming cpu + bpf";
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
    description_ =
        fmt::format("cpu {}, data path {}, pipes {} bytes (at most {}){}, steering {}{}, {}",
                    setup_.cpu, to_string(data_path_), pool_->pipe_size(), pool_->max_pipes(),
                    copy_buffers, steering, busy_poll, ring_->features().describe());
    log_pool_notices();
}

void Shard::serve() {
    arm_accept();
    ring_->poll(wake_fd_.get(), POLLIN, shard_tag(Op::Wake));
    ++shard_ops_in_flight_;

    while (!done_serving()) {
        // Splices are non-blocking, so each one in flight completes soon. With two or
        // more outstanding, waiting for two means a hard-linked pair comes back in one
        // wake-up instead of two (DEFER_TASKRUN wakes us only when that many
        // completions are queued); waiting for more would hold finished work back.
        unsigned wait_for = splices_in_flight_ >= 2 ? 2 : 1;
        // Busy polling only while no splice is in flight: a splice completes on an
        // io-wq worker pinned to this same CPU, and a shard spinning on it would keep
        // that worker from running (measured: one bulk stream fell from 13.6 to 7.7
        // Gbit/s when it did).
        std::chrono::microseconds spin =
            splices_in_flight_ == 0 ? config_.busy_poll : std::chrono::microseconds{0};
        for (const uring::Completion& c : ring_->submit_and_wait(wait_for, spin))
            dispatch(c);
        resume_pipe_waiters();
        resume_buffer_waiters();
        finish_when_idle();
        log_pool_notices();
        publish_counters();
    }
    listener_.reset();
    log_.debug("stopped");
}

bool Shard::done_serving() const {
    return stopping_ && table_.active() == 0 && shard_ops_in_flight_ == 0;
}

void Shard::publish_counters() {
    set(counters_.enters, ring_->counters().enters);
    set(counters_.completions, ring_->counters().completions);
    const pipes::PoolCounters& p = pool_->counters();
    set(counters_.pipes_created, p.created);
    set(counters_.pipes_leased, p.leased_now);
    set(counters_.pipes_closed_dirty, p.closed_dirty);
    set(counters_.pipe_size_reductions, p.size_reductions);
    if (buffers_)
        set(counters_.buffers_out, buffers_->out());
}

void Shard::log_pool_notices() {
    for (const std::string& notice : pool_->take_notices())
        log_.warn("{}", notice);
}

void Shard::dispatch(const uring::Completion& c) {
    OpTag t = OpTag::decode(c.user_data);
    if (!t.for_shard()) {
        on_connection_op(t, c);
        return;
    }
    switch (t.op) {
    case Op::Accept:
        on_accept(c);
        break;
    case Op::AcceptPause:
        --shard_ops_in_flight_;
        on_accept_pause_over();
        break;
    case Op::Wake:
        --shard_ops_in_flight_;
        on_wake(c.result);
        break;
    case Op::DrainDeadline:
        --shard_ops_in_flight_;
        drain_timer_armed_ = false;
        if (c.result == -ETIME)
            abort_all("drain timeout");
        break;
    case Op::PipeRetry:
        --shard_ops_in_flight_;
        pipe_retry_armed_ = false;
        break; // resume_pipe_waiters() runs after every batch
    case Op::ShardCancel:
        --shard_ops_in_flight_;
        break;
    default:
        log_.error("completion with unknown shard operation {}", static_cast<int>(t.op));
    }
}

// ---------------------------------------------------------------- listener

void Shard::arm_accept() {
    ring_->accept_multishot(listener_.get(), shard_tag(Op::Accept));
    ++shard_ops_in_flight_;
    accept_armed_ = true;
}

void Shard::on_accept(const uring::Completion& c) {
    if (!c.more()) {
        --shard_ops_in_flight_;
        accept_armed_ = false;
        accept_cancel_pending_ = false;
        if (stopping_)
            listener_.reset(); // refuse new clients now, not when the shard ends
    }
    if (c.result >= 0) {
        if (stopping_)
            ::close(c.result);
        else
            on_new_client(c.result);
    } else if (c.result != -ECANCELED) {
        int err = -c.result;
        if (is_resource_shortage(err))
            note_fd_shortage("accept", err);
        else
            log_.warn("accept: {}", std::strerror(err));
    }
    if (accept_armed_ || stopping_ || accept_paused_)
        return;
    if (pause_wanted_) {
        pause_wanted_ = false;
        accept_paused_ = true;
        submit_shard_op_timeout(Op::AcceptPause, accept_backoff_);
    } else {
        arm_accept();
    }
}

void Shard::note_fd_shortage(const char* what, int err) {
    bump(counters_.accept_backoffs);
    if (accept_backoff_.count() == 0) {
        log_.warn("{}: {} with {} connections open; pausing accepts, pending clients wait "
                  "in the backlog",
                  what, std::strerror(err), table_.active());
        accept_backoff_ = kFirstAcceptBackoff;
    } else {
        accept_backoff_ = std::min(accept_backoff_ * 2, kMaxAcceptBackoff);
    }
    pause_wanted_ = true;
    // A multishot accept would keep taking clients we cannot serve (each needs a
    // second fd for its upstream): stop it; on_accept() pauses once it has ended.
    if (accept_armed_ && !accept_cancel_pending_) {
        ring_->cancel_fd(listener_.get(), shard_tag(Op::ShardCancel));
        ++shard_ops_in_flight_;
        accept_cancel_pending_ = true;
    }
}

void Shard::on_accept_pause_over() {
    accept_paused_ = false;
    if (!stopping_ && !accept_armed_)
        arm_accept();
}

void Shard::submit_shard_op_timeout(Op op, std::chrono::milliseconds after) {
    ring_->timeout(after, shard_tag(op));
    ++shard_ops_in_flight_;
}

void Shard::on_wake(int result) {
    if (result < 0)
        return; // cancelled: the shard is finishing
    uint64_t value = 0;
    [[maybe_unused]] ssize_t n = ::read(wake_fd_.get(), &value, sizeof(value));
    begin_stop();
    auto drain = std::chrono::milliseconds(drain_ms_.load(std::memory_order_acquire));
    if (drain.count() <= 0) {
        abort_all("engine stopping");
    } else if (table_.active() > 0 && !drain_timer_armed_) {
        // A later request with a drain keeps the first deadline; one with none resets
        // everything at once (above).
        drain_timer_armed_ = true;
        submit_shard_op_timeout(Op::DrainDeadline, drain);
        log_.info("stopping: waiting up to {} ms for {} connections to finish", drain.count(),
                  table_.active());
    }
    // Listen for a further request (a second SIGTERM shortening the drain).
    ring_->poll(wake_fd_.get(), POLLIN, shard_tag(Op::Wake));
    ++shard_ops_in_flight_;
}

void Shard::begin_stop() {
    if (stopping_)
        return;
    stopping_ = true;
    // Stop accepting at once; the listener is closed when the accept completes.
    if (accept_armed_) {
        ring_->cancel_fd(listener_.get(), shard_tag(Op::ShardCancel));
        ++shard_ops_in_flight_;
    } else {
        listener_.reset();
    }
    if (accept_paused_) {
        ring_->cancel(shard_tag(Op::AcceptPause), shard_tag(Op::ShardCancel));
        ++shard_ops_in_flight_;
    }
    if (pipe_retry_armed_) {
        ring_->cancel(shard_tag(Op::PipeRetry), shard_tag(Op::ShardCancel));
        ++shard_ops_in_flight_;
    }
}

void Shard::abort_all(const char* reason) {
    table_.for_each_active(
        [this, reason](uint32_t slot, Connection& conn) { abort(slot, conn, reason); });
}

void Shard::finish_when_idle() {
    if (!stopping_ || final_cancels_sent_ || table_.active() > 0)
        return;
    // Every connection is gone: withdraw the wake-up poll and any drain deadline, and
    // the loop ends once their completions are in.
    final_cancels_sent_ = true;
    ring_->cancel(shard_tag(Op::Wake), shard_tag(Op::ShardCancel));
    ++shard_ops_in_flight_;
    if (drain_timer_armed_) {
        ring_->cancel(shard_tag(Op::DrainDeadline), shard_tag(Op::ShardCancel));
        ++shard_ops_in_flight_;
    }
}

// ---------------------------------------------------------------- connections

uint64_t Shard::tag(Op op, uint32_t slot, const Connection& conn, int d) const {
    return OpTag{op, static_cast<uint8_t>(d), conn.generation, slot}.encode();
}

void Shard::on_new_client(int fd) {
    uint32_t slot = table_.allocate();
    Connection& conn = table_.at(slot);
    conn.client.reset(fd);
    bump(counters_.accepted);
    bump(counters_.active);

    conn.upstream = open_stream_socket(setup_.upstream);
    if (!conn.upstream) {
        bump(counters_.upstream_failures);
        int err = errno;
        if (is_resource_shortage(err))
            note_fd_shortage("upstream socket", err);
        if (upstream_failure_log_.allow(LogThrottle::Clock::now()))
            log_.warn("cannot open a socket to the upstream ({}); resetting client {}{}",
                      std::strerror(err), peer_name(fd),
                      suppressed_note(upstream_failure_log_.suppressed()));
        conn.phase = Phase::Closing;
        conn.reset_on_close = true;
        settle(slot, conn);
        return;
    }
    if (!pause_wanted_ && !accept_paused_)
        accept_backoff_ = std::chrono::milliseconds{0}; // the shortage episode is over
    if (client_is_tcp_)
        set_no_delay(fd);
    if (upstream_is_tcp_)
        set_no_delay(conn.upstream.get());

    conn.dirs[Connection::kToUpstream].src = conn.client.get();
    conn.dirs[Connection::kToUpstream].dst = conn.upstream.get();
    conn.dirs[Connection::kToClient].src = conn.upstream.get();
    conn.dirs[Connection::kToClient].dst = conn.client.get();

    // The connect is soft-linked to a timeout: whichever ends first cancels the other.
    // A timed-out connect completes with -ECANCELED.
    ring_->connect(conn.upstream.get(), setup_.upstream.get(), setup_.upstream.length,
                   tag(Op::Connect, slot, conn), uring::Link::Soft);
    ring_->link_timeout(config_.connect_timeout, tag(Op::ConnectTimeout, slot, conn));
    conn.ops_in_flight += 2;
}

void Shard::on_connection_op(const OpTag& t, const uring::Completion& c) {
    Connection* found = table_.find(t.slot, t.generation);
    if (found == nullptr) {
        log_.error("completion for a connection that no longer exists (op {})",
                   static_cast<int>(t.op));
        return;
    }
    Connection& conn = *found;
    if (!c.more()) // a multishot operation counts as one until its last completion
        --conn.ops_in_flight;
    int d = t.direction;
    switch (t.op) {
    case Op::Connect:
        on_connected(t.slot, conn, c.result);
        break;
    case Op::ConnectTimeout:
    case Op::Cancel:
        break;
    case Op::PollIn:
        on_readable(t.slot, conn, d, c.result);
        break;
    case Op::PollOut:
        on_writable(t.slot, conn, d, c.result);
        break;
    case Op::SpliceIn:
    case Op::SpliceOut:
        on_pair_half(t.slot, conn, d, t.op, c.result);
        break;
    case Op::Drain:
        on_drained(t.slot, conn, d, c.result);
        break;
    case Op::Recv:
        on_received(t.slot, conn, d, c);
        break;
    case Op::Send:
        on_sent(t.slot, conn, d, c.result);
        break;
    case Op::ErrorWatch:
        on_error_watch(t.slot, conn, d, c.result, c.more());
        break;
    default:
        log_.error("completion with unknown connection operation {}", static_cast<int>(t.op));
    }
    settle(t.slot, conn);
}

void Shard::on_connected(uint32_t slot, Connection& conn, int result) {
    if (conn.phase == Phase::Closing)
        return;
    if (result < 0) {
        bump(counters_.upstream_failures);
        std::string why = result == -ECANCELED ? fmt::format("no answer within {} ms",
                                                             config_.connect_timeout.count())
                                               : errno_text(result);
        if (upstream_failure_log_.allow(LogThrottle::Clock::now()))
            log_.warn("upstream {}: {}; resetting client {}{}",
                      to_endpoint(setup_.upstream).to_string(), why, peer_name(conn.client.get()),
                      suppressed_note(upstream_failure_log_.suppressed()));
        abort(slot, conn, "upstream connect failed");
        return;
    }
    conn.phase = Phase::Forwarding;
    start_direction(slot, conn, Connection::kToUpstream);
    start_direction(slot, conn, Connection::kToClient);
}

void Shard::abort(uint32_t slot, Connection& conn, const std::string& reason) {
    if (conn.phase == Phase::Closing)
        return;
    log_.debug("connection {}: closing with reset: {}", slot, reason);
    close_connection(slot, conn, /*reset=*/true);
}

void Shard::close_connection(uint32_t slot, Connection& conn, bool reset) {
    conn.phase = Phase::Closing;
    conn.reset_on_close = reset;
    unsigned watches = (conn.dirs[0].watching ? 1u : 0u) + (conn.dirs[1].watching ? 1u : 0u);
    if (conn.ops_in_flight > 0 && conn.ops_in_flight == watches) {
        // The usual clean end: only error watches are left. Cancel them by tag, which
        // io_uring finds with one hash lookup; a cancel by fd walks every bucket of
        // the ring's poll table (io_uring/poll.c io_poll_file_find), twice per
        // connection: 2.7 % of the proxy's CPU under connection churn (perf).
        for (int d = 0; d < 2; ++d)
            unwatch_source(slot, conn, d);
    } else if (conn.ops_in_flight > 0) {
        // Cancels polls, queued splices into these sockets and a pending connect.
        // Splices already running finish on their own: every one is non-blocking.
        for (const uring::UniqueFd* fd : {&conn.client, &conn.upstream}) {
            if (fd->valid()) {
                ring_->cancel_fd(fd->get(), tag(Op::Cancel, slot, conn));
                ++conn.ops_in_flight;
            }
        }
    }
    settle(slot, conn);
}

void Shard::on_error_watch(uint32_t slot, Connection& conn, int d, int result, bool more) {
    if (!more)
        conn.dirs[d].watching = false;
    if (conn.phase == Phase::Closing || result < 0)
        return;
    // POLLERR: the watched source was reset (or, for a Unix peer, closed with our
    // bytes unread). Nothing it sent can be trusted to be complete any more and nothing
    // can be delivered to it: reset the other side too. The first completion
    // (POLLRDHUP after a FIN) and POLLHUP (both halves shut, data may still be queued)
    // are no reason to.
    if (result & POLLERR)
        abort(slot, conn, fmt::format("{} was reset while nobody read from it", source_name(d)));
}

void Shard::watch_source(uint32_t slot, Connection& conn, int d) {
    Direction& dir = conn.dirs[d];
    if (dir.watching)
        return;
    // Nothing reads this source while the direction waits for its destination or has
    // finished, and the other direction may be idle: nothing would notice a reset of
    // this peer. Watch it for errors. A one-shot poll cannot: the kernel always adds
    // POLLRDHUP, POLLHUP and POLLERR (io_uring/poll.c io_init_poll_iocb), and a source
    // that sent FIN reports POLLRDHUP for good, so it would complete at once. A
    // multishot poll reports that once, then only new wake-ups: the reset's POLLERR.
    ring_->poll_multishot(dir.src, POLLERR | POLLHUP, tag(Op::ErrorWatch, slot, conn, d));
    ++conn.ops_in_flight;
    dir.watching = true;
}

void Shard::unwatch_source(uint32_t slot, Connection& conn, int d) {
    Direction& dir = conn.dirs[d];
    if (!dir.watching)
        return;
    ring_->cancel(tag(Op::ErrorWatch, slot, conn, d), tag(Op::Cancel, slot, conn, d));
    ++conn.ops_in_flight;
    dir.watching = false; // its last completion (-ECANCELED) is still to come
}

void Shard::settle(uint32_t slot, Connection& conn) {
    if (conn.in_use && conn.phase == Phase::Closing && conn.ops_in_flight == 0)
        finalize(slot, conn);
}

void Shard::finalize(uint32_t slot, Connection& conn) {
    for (Direction& dir : conn.dirs) {
        release_pipe(dir, /*verify=*/conn.reset_on_close);
        give_back_chunks(dir);
    }
    if (conn.reset_on_close) {
        for (const uring::UniqueFd* fd : {&conn.client, &conn.upstream})
            if (fd->valid())
                set_reset_on_close(fd->get());
    }
    table_.release(slot); // closes both sockets
    drop(counters_.active);
}

// ---------------------------------------------------------------- directions

void Shard::start_reading(uint32_t slot, Connection& conn, int d) {
    Direction& dir = conn.dirs[d];
    dir.state = DirState::PollingIn;
    // One-shot and level-checked when armed (kernel-notes.md §2.3): if data is already
    // queued it completes at once, inline, without an io-wq thread.
    ring_->poll(dir.src, POLLIN, tag(Op::PollIn, slot, conn, d));
    ++conn.ops_in_flight;
}

bool Shard::poll_succeeded(uint32_t slot, Connection& conn, int result) {
    if (conn.phase == Phase::Closing)
        return false;
    if (result < 0) {
        abort(slot, conn, fmt::format("poll: {}", errno_text(result)));
        return false;
    }
    return true;
}

void Shard::on_readable(uint32_t slot, Connection& conn, int d, int result) {
    if (!poll_succeeded(slot, conn, result))
        return;
    Direction& dir = conn.dirs[d];
    dir.pipe = pool_->lease();
    if (!dir.pipe) {
        dir.state = DirState::WaitingPipe;
        pipe_waiters_.push_back({slot, conn.generation, d});
        bump(counters_.pipe_waits);
        return;
    }
    start_pair(slot, conn, d);
}

void Shard::start_pair(uint32_t slot, Connection& conn, int d) {
    Direction& dir = conn.dirs[d];
    unsigned len = static_cast<unsigned>(dir.pipe->capacity());
    dir.state = DirState::Splicing;
    dir.pair_pending = 2;
    // Hard link: the second splice runs even when the first moves less than `len`,
    // which is the normal case; a soft link would cancel it (kernel-notes.md §3).
    // The pipe is empty here, so the second splice moves exactly what the first put
    // in, or stops early when the destination is full.
    ring_->splice(dir.src, dir.pipe->write_fd(), len, kSpliceFlags,
                  tag(Op::SpliceIn, slot, conn, d), uring::Link::Hard);
    ring_->splice(dir.pipe->read_fd(), dir.dst, len, kSpliceFlags,
                  tag(Op::SpliceOut, slot, conn, d));
    conn.ops_in_flight += 2;
    splices_in_flight_ += 2;
}

void Shard::count_bytes(int d, int moved) {
    if (moved <= 0)
        return;
    bump(d == Connection::kToUpstream ? counters_.bytes_to_upstream : counters_.bytes_to_client,
         static_cast<uint64_t>(moved));
}

void Shard::on_pair_half(uint32_t slot, Connection& conn, int d, Op op, int result) {
    Direction& dir = conn.dirs[d];
    (op == Op::SpliceIn ? dir.pair_in : dir.pair_out) = result;
    --splices_in_flight_;
    bump(counters_.splices);
    if (result == -EAGAIN)
        bump(counters_.eagains);
    if (--dir.pair_pending > 0)
        return;

    // Account first, whatever happens next: the counter decides whether this pipe may
    // ever be reused, so it must be exact even for a connection being torn down.
    if (dir.pair_in > 0)
        dir.pipe->filled(static_cast<std::size_t>(dir.pair_in));
    if (dir.pair_out > 0)
        dir.pipe->drained(static_cast<std::size_t>(dir.pair_out));
    count_bytes(d, dir.pair_out);
    if (dir.pair_in > 0 && !dir.pipe->empty())
        bump(counters_.short_splices);

    if (conn.phase == Phase::Closing)
        return;
    Next next = after_pair({dir.pair_in, dir.pair_out, dir.pipe->bytes(), dir.pipe->capacity()});
    follow(slot, conn, d, next, dir.pair_in, dir.pair_out);
}

void Shard::on_writable(uint32_t slot, Connection& conn, int d, int result) {
    if (!poll_succeeded(slot, conn, result))
        return;
    Direction& dir = conn.dirs[d];
    dir.state = DirState::Draining;
    ring_->splice(dir.pipe->read_fd(), dir.dst, static_cast<unsigned>(dir.pipe->bytes()),
                  kSpliceFlags, tag(Op::Drain, slot, conn, d));
    ++conn.ops_in_flight;
    ++splices_in_flight_;
}

void Shard::on_drained(uint32_t slot, Connection& conn, int d, int result) {
    Direction& dir = conn.dirs[d];
    --splices_in_flight_;
    bump(counters_.splices);
    if (result == -EAGAIN)
        bump(counters_.eagains);
    if (result > 0)
        dir.pipe->drained(static_cast<std::size_t>(result));
    count_bytes(d, result);
    if (conn.phase == Phase::Closing)
        return;
    follow(slot, conn, d, after_drain(result, dir.pipe->bytes()), /*read_result=*/0, result);
}

void Shard::follow(uint32_t slot, Connection& conn, int d, Next next, int read_result,
                   int write_result) {
    Direction& dir = conn.dirs[d];
    switch (next) {
    case Next::SpliceAgain:
        dir.small_in_a_row = 0; // a bulk read
        start_pair(slot, conn, d);
        break;
    case Next::WaitReadable: {
        bool small =
            splice_turns_small(data_path_, read_result, dir.pipe->capacity(), dir.small_in_a_row);
        // An idle direction holds no pipe: 10 000 idle connections cost no pipe memory.
        release_pipe(dir, false);
        if (small) {
            // A request or reply: the next one is most likely small too, and copying it
            // saves the io-wq hop. The watch stays: it is harmless while receiving.
            bump(counters_.switches_to_copy);
            dir.path = Path::Copy;
            dir.full_in_a_row = 0;
            dir.small_in_a_row = 0;
            pump_copy(slot, conn, d);
            break;
        }
        unwatch_source(slot, conn, d); // the POLLIN poll reports errors too
        start_reading(slot, conn, d);
        break;
    }
    case Next::WaitWritable:
        watch_source(slot, conn, d);
        dir.state = DirState::PollingOut;
        ring_->poll(dir.dst, POLLOUT, tag(Op::PollOut, slot, conn, d));
        ++conn.ops_in_flight;
        break;
    case Next::SourceEnded:
        release_pipe(dir, false);
        end_direction(slot, conn, d);
        break;
    case Next::SourceFailed:
        abort(slot, conn, fmt::format("reading {}: {}", source_name(d), errno_text(read_result)));
        break;
    case Next::DestFailed:
        abort(slot, conn,
              fmt::format("writing {}: {}", destination_name(d), errno_text(write_result)));
        break;
    }
}

void Shard::end_direction(uint32_t slot, Connection& conn, int d) {
    Direction& dir = conn.dirs[d];
    // Half-close: pass the FIN on; the other direction keeps flowing.
    ::shutdown(dir.dst, SHUT_WR);
    dir.state = DirState::Done;
    if (conn.both_done())
        close_connection(slot, conn, /*reset=*/false); // clean end: FIN both ways
    else
        watch_source(slot, conn, d);
}

void Shard::release_pipe(Direction& dir, bool verify) {
    if (!dir.pipe)
        return;
    pool_->give_back(std::move(*dir.pipe),
                     verify ? pipes::PipePool::Check::AskKernel : pipes::PipePool::Check::Counter);
    dir.pipe.reset();
}

void Shard::resume_pipe_waiters() {
    while (!pipe_waiters_.empty()) {
        WaitingDirection w = pipe_waiters_.front();
        Connection* conn = table_.find(w.slot, w.generation);
        if (conn == nullptr || conn->phase != Phase::Forwarding ||
            conn->dirs[w.direction].state != DirState::WaitingPipe) {
            pipe_waiters_.pop_front();
            continue;
        }
        std::optional<pipes::Pipe> pipe = pool_->lease();
        if (!pipe)
            break;
        pipe_waiters_.pop_front();
        conn->dirs[w.direction].pipe = std::move(pipe);
        start_pair(w.slot, *conn, w.direction);
    }
    // If no pipe is out, none will come back to wake the waiters: the kernel refused
    // to make one (fd or pipe budget). Try again a little later.
    if (!pipe_waiters_.empty() && pool_->counters().leased_now == 0 && !pipe_retry_armed_ &&
        !stopping_) {
        pipe_retry_armed_ = true;
        submit_shard_op_timeout(Op::PipeRetry, kPipeRetryDelay);
    }
}

} // namespace uringfwd::engine
