// Setting a shard up on its own thread: pinning, the ring and its io-wq workers, the
// pipe pool, the copy buffers, the routes and the listeners.
#include "platform/cpu_affinity.hpp"
#include "shard/inspect/sni_inspector.hpp"
#include "shard/shard.hpp"
#include "uringfwd/cpu_list.hpp"

#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace uringfwd::engine {

namespace {
// The shard's one provided-buffer group (buffer groups are per ring).
constexpr uint16_t kCopyBufferGroup = 0;
constexpr uint16_t kBulkBufferGroup = 1;
// The default file table's size at most: 65536 connections per shard.
constexpr rlim_t kDefaultTableCap = rlim_t{1} << 17;

// Says which CPUs the kernel gave the shard's io-wq workers when it asked for more than
// its own CPU (iowq_cpus = "node"), as one of them reports. Since Linux 6.2 a worker
// stays on the CPUs its shard thread pinned itself to wherever the two overlap: it
// inherits the thread's requested affinity (kernel/fork.c dup_task_struct ->
// dup_user_cpus_ptr, kept since commit 8f9ea86fdf99 "sched: Always preserve the user
// requested cpumask") and set_cpus_allowed_ptr() intersects any new mask with it
// (kernel/sched/core.c __set_cpus_allowed_ptr, commit da019032819a "sched: Enforce user
// requested affinity"), so io_init_new_worker's set_cpus_allowed_ptr(wq->cpu_mask)
// (io_uring/io-wq.c) yields the shard's CPU. Nothing in user space undoes that for a
// pinned thread, so the log says it; 6.1 gives the whole mask.
void report_worker_cpus(uring::Ring& ring, const std::vector<int>& asked, int shard_tid,
                        const Logger& log) {
    std::vector<int> given;
    if (ring.run_on_worker() >= 0)
        given = io_worker_cpus(shard_tid);
    if (given.empty())
        log.info("io-wq workers: asked for CPUs {} (iowq_cpus = \"node\"); no "
                 "worker could be seen to tell what the kernel gave",
                 format_cpu_list(asked));
    else if (given == asked)
        log.info("io-wq workers: CPUs {}, the node's, as iowq_cpus = \"node\" asks",
                 format_cpu_list(given));
    else
        log.warn("io-wq workers: CPUs {}, not the node's {} that iowq_cpus = "
                 "\"node\" asks for: this kernel (Linux 6.2 or later) keeps a worker on the "
                 "CPU its shard thread is pinned to, so each shard's workers share its CPU",
                 format_cpu_list(given), format_cpu_list(asked));
}
} // namespace

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
    // As many pipes as configured, or fewer when the fd limit is short (fd_room.hpp).
    pool_ = std::make_unique<pipes::PipePool>(setup_.max_pipes, config_.splice.pipe_size);
    setup_buffers();
    context_ = std::make_unique<ShardContext>(ShardContext{
        *io_, *pool_, buffers_.get(), bulk_buffers_.get(), io_->ring().features().recvsend_bundle,
        data_path_, config_, log_, setup_.index});
    for (const Route& route : setup_.routes->routes)
        routes_.push_back(std::make_unique<ShardRoute>(route, setup_.routes,
                                                       static_cast<std::size_t>(setup_.index)));
    plan_idle_sweep();
    make_group_inspectors();
    fd_connections_ = setup_.fd_connections.get();
    connections_ = std::make_unique<Connections>(
        *context_,
        [this](ShardRoute& route, SocketUnits units) {
            give_units(units);
            on_room(route);
        },
        [this](const RouteTable& table, std::size_t index) { return shard_route_of(table, index); },
        [this](DetachedConnection&& conn, Resumed::SameEngine&& same, int to) {
            send_moved(std::move(conn), std::move(same), to);
        });
    context_->direct = direct_;
    context_->inline_splice = choose_inline_splice();
    context_->doorbells = setup_.doorbells.get();
    for (ListenerSetup ls : setup_.listeners) {
        ls.direct = direct_;
        listeners_.push_back(std::make_unique<Listener>(*io_, log_, ls));
        bound_.push_back(listeners_.back()->bound());
        listener_fds_.push_back(listeners_.back()->fd());
    }
    plan_budget();
    if (direct_ && slot_room_ == 0)
        throw std::runtime_error(fmt::format(
            "the registered file table of {} slots leaves room for no connection (two slots "
            "each); raise [engine] direct_table_size or the fd limit",
            io_->ring().file_table_slots()));

    // Probe the pipe size now, so the start-up line tells the truth and any budget
    // refusal shows up at once rather than on the first connection. The copy path
    // needs no pipe at all.
    if (data_path_ != DataPath::Copy) {
        if (auto pipe = pool_->lease())
            pool_->give_back(std::move(*pipe));
    }
    info_.cpu = setup_.cpu;
    info_.data_path = data_path_;
    info_.inline_splice = context_->inline_splice;
    info_.pipe_size = pool_->pipe_size();
    info_.max_pipes = pool_->max_pipes();
    if (buffers_) {
        info_.copy_buffers = buffers_->count();
        info_.copy_buffer_size = buffers_->buffer_size();
    }
    if (bulk_buffers_) {
        info_.bulk_buffers = bulk_buffers_->count();
        info_.bulk_buffer_size = bulk_buffers_->buffer_size();
    }
    info_.steering = listeners_.front()->steering();
    info_.busy_poll = config_.ring.busy_poll;
    info_.ring_features = io_->ring().features().describe();
    info_.direct_descriptors = direct_;
    if (direct_)
        info_.direct_slots = io_->ring().file_table_slots();
    log_pool_notices();
}

bool Shard::choose_inline_splice() const {
    // A parked source is blocking (bulk_park, docs/kernel.md §1.8): a splice(2) on the
    // shard's thread from or into it could wait, so parking keeps the ring's splices.
    bool parking = config_.experimental.bulk_park.count() > 0;
    switch (config_.splice.splice_mechanism) {
    case SpliceMechanism::Ring:
        return false;
    case SpliceMechanism::Inline:
        return true; // validate() refused it with bulk_park
    case SpliceMechanism::Auto:
        return !parking;
    }
    return false;
}

void Shard::make_group_inspectors() {
    group_inspectors_.clear();
    for (const ListenGroup& group : setup_.routes->groups)
        group_inspectors_.push_back(group.router ? make_sni_inspector(group.router) : nullptr);
}

void Shard::setup_ring() {
    io_ = std::make_unique<ShardIo>(config_.ring.ring_entries, counters_);
    slot_closer_ = {io_.get(), &in_flight_};
    uring::Ring& ring = io_->ring();
    if (!setup_.worker_cpus.empty()) {
        // io-wq workers run the splices; one on another CPU than the shard costs 2.3 to
        // 2.9 times as much per splice (docs/kernel.md §1.7). Refusal is not fatal (a cpuset may
        // exclude the mask since 6.12): workers then run where the kernel likes.
        if (int rc = ring.set_worker_affinity(setup_.worker_cpus); rc < 0)
            log_.warn("io-wq affinity refused ({}); workers may run on any CPU",
                      std::strerror(-rc));
        else if (setup_.index == 0 && setup_.worker_cpus.size() > 1)
            report_worker_cpus(ring, setup_.worker_cpus,
                               counters_.thread_id.load(std::memory_order_relaxed), log_);
    }
    // Cap the unbounded io-wq pool (where socket and pipe splices go). Every splice we
    // submit is non-blocking, and at most one runs per leased pipe (a hard-linked pair
    // runs back to back on one worker), so max_pipes workers can never starve a ready
    // splice (docs/kernel.md §1.4); the cap only guards against a kernel that blocks
    // anyway, which would otherwise grow one thread per idle connection (§1.3).
    unsigned workers = config_.placement.iowq_max_workers != 0
                           ? config_.placement.iowq_max_workers
                           : static_cast<unsigned>(config_.splice.max_pipes) + 4;
    ring.set_worker_limits(0, workers);
    setup_direct_descriptors();
}

// Direct descriptors (docs/kernel.md §11): a sparse file table registered on the ring,
// then every operation they need tried once. `auto` falls back to plain fds with one
// info line (from the first shard), `on` refuses to start.
void Shard::setup_direct_descriptors() {
    direct_ = false;
    if (config_.ring.direct_descriptors == DirectDescriptors::Off) {
        info_.plain_fds_reason = "direct_descriptors = \"off\"";
        return;
    }
    if (config_.experimental.bulk_park.count() > 0) {
        // A parked source is made blocking and given SO_RCVTIMEO with fcntl(2) and
        // setsockopt(2) (directions_park.cpp): both need an fd, and io_uring has no
        // command that changes a file's O_NONBLOCK.
        // validate() refused direct_descriptors = "on" with bulk_park, for this reason.
        const char* why = "bulk_park needs plain fds (it toggles O_NONBLOCK with fcntl)";
        if (setup_.index == 0)
            log_.info("direct descriptors off: {}", why);
        info_.plain_fds_reason = why;
        return;
    }
    uring::Ring& ring = io_->ring();
    unsigned slots = config_.ring.direct_table_size;
    if (slots == 0) {
        // One slot per fd the process may open: the kernel refuses a larger table
        // (io_uring/rsrc.c io_sqe_files_register: nr_args > rlimit(RLIMIT_NOFILE) ->
        // -EMFILE), but counts each ring's table alone, so every shard may have one
        // this size. Capped at kDefaultTableCap: the kernel allocates the whole table
        // at registration (a pointer a slot and a bitmap), and a service's hard limit is often
        // 524288 or more, times every shard.
        rlimit lim{};
        ::getrlimit(RLIMIT_NOFILE, &lim);
        slots = static_cast<unsigned>(std::min<rlim_t>(lim.rlim_cur, kDefaultTableCap));
    }
    std::string missing;
    if (int rc = ring.register_file_table(slots); rc < 0)
        missing =
            fmt::format("registering a file table of {} slots: {}", slots, std::strerror(-rc));
    else
        missing = ring.probe_direct();
    if (missing.empty()) {
        direct_ = true;
        return;
    }
    if (config_.ring.direct_descriptors == DirectDescriptors::On)
        throw std::runtime_error(fmt::format(
            "direct descriptors were asked for (direct_descriptors = \"on\") but this kernel "
            "cannot give them: {}; use \"auto\" or \"off\"",
            missing));
    if (setup_.index == 0)
        log_.info("direct descriptors unavailable ({}); using plain file descriptors", missing);
    info_.plain_fds_reason = missing;
}

void Shard::setup_buffers() {
    data_path_ = config_.data_path;
    if (data_path_ == DataPath::Splice)
        return;
    try {
        buffers_ = std::make_unique<uring::ProvidedBuffers>(io_->ring(), kCopyBufferGroup,
                                                            config_.copy.copy_buffers,
                                                            config_.copy.copy_buffer_size);
    } catch (const uring::RingError& e) {
        if (data_path_ == DataPath::Copy)
            throw std::runtime_error(fmt::format("data path copy: {}", e.what()));
        log_.warn("{}: forwarding with splice only", e.what());
        data_path_ = DataPath::Splice;
        return;
    }
    // Auto's bulk directions splice (cheaper per GB, docs/bulk-experiments.md), so
    // only Copy has a use for large buffers.
    if (data_path_ != DataPath::Copy || config_.copy.bulk_buffers == 0)
        return;
    try {
        bulk_buffers_ = std::make_unique<uring::ProvidedBuffers>(io_->ring(), kBulkBufferGroup,
                                                                 config_.copy.bulk_buffers,
                                                                 config_.copy.bulk_buffer_size);
    } catch (const uring::RingError& e) {
        log_.warn("{}: bulk directions keep the small copy buffers", e.what());
    }
}

} // namespace uringfwd::engine
