#include "uring/ring.hpp"

#include "uring/ring_state.hpp"

#include <fmt/format.h>
#include <liburing.h>
#include <sched.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace uringfwd::uring {

namespace {
// liburing 2.3 (Debian 12) predates receive/send bundles: the values are the kernel's
// uapi (include/uapi/linux/io_uring.h, 6.10: "#define IORING_RECVSEND_BUNDLE (1U << 4)"
// among the send/recv ioprio flags, and "#define IORING_FEAT_RECVSEND_BUNDLE (1U << 14)").
// An older kernel rejects the ioprio flag with EINVAL (io_uring/net.c io_recvmsg_prep
// checks sr->flags against RECVMSG_FLAGS), so it is used only where the feature is set.
constexpr uint16_t kRecvSendBundle = 1U << 4;
constexpr uint32_t kFeatRecvSendBundle = 1U << 14;
} // namespace

bool Completion::more() const {
    return (flags & IORING_CQE_F_MORE) != 0;
}

std::optional<uint16_t> Completion::buffer() const {
    if ((flags & IORING_CQE_F_BUFFER) == 0)
        return std::nullopt;
    return static_cast<uint16_t>(flags >> IORING_CQE_BUFFER_SHIFT);
}

std::string RingFeatures::describe() const {
    std::string out = fmt::format("io_uring sq={} cq={}", sq_entries, cq_entries);
    if (single_issuer)
        out += " single-issuer";
    if (defer_taskrun)
        out += " defer-taskrun";
    if (coop_taskrun)
        out += " coop-taskrun";
    if (submit_all)
        out += " submit-all";
    if (registered_ring_fd)
        out += " registered-ring-fd";
    if (recvsend_bundle)
        out += " bundles";
    return out;
}

namespace {

// Setup flags, best first. Each shard thread is the only submitter to its ring, so
// SINGLE_ISSUER (6.0) lets the kernel skip locking, and DEFER_TASKRUN (6.1) runs
// completion work only when the shard enters the kernel to wait, which is exactly
// when it wants completions: no interrupts of the shard while it is busy. A kernel
// that refuses a combination answers EINVAL and we try the next (docs/kernel.md §7).
struct SetupAttempt {
    unsigned flags;
};
constexpr unsigned kSubmitAll = IORING_SETUP_SUBMIT_ALL;
constexpr SetupAttempt kAttempts[] = {
    {IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | kSubmitAll},
    {IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG | kSubmitAll},
    {kSubmitAll},
    {0},
};

[[noreturn]] void throw_unavailable(int err) {
    if (err == ENOSYS || err == EPERM || err == EACCES) {
        throw RingError(
            fmt::format("io_uring is unavailable ({}): it is disabled by the kernel "
                        "(sysctl kernel.io_uring_disabled) or blocked by a seccomp profile (e.g. "
                        "a container runtime's default); allow io_uring_setup/io_uring_enter/"
                        "io_uring_register or set kernel.io_uring_disabled=0",
                        std::strerror(err)));
    }
    if (err == ENOMEM)
        throw RingError("io_uring setup failed: out of memory (locked-memory limit? "
                        "raise `ulimit -l` or use a smaller ring)");
    throw RingError(fmt::format("io_uring setup failed: {}", std::strerror(err)));
}

} // namespace

Ring::Ring(unsigned entries) : state_(std::make_unique<State>()) {
    int last_error = 0;
    bool ok = false;
    for (const SetupAttempt& attempt : kAttempts) {
        io_uring_params params{};
        params.flags = attempt.flags | IORING_SETUP_CQSIZE;
        // Completions arrive in bursts (two per splice pair, one per poll); a large CQ
        // keeps the kernel from spilling into its overflow list.
        params.cq_entries = entries * 4;
        int ret = io_uring_queue_init_params(entries, &state_->ring, &params);
        if (ret == 0) {
            features_.single_issuer = params.flags & IORING_SETUP_SINGLE_ISSUER;
            features_.defer_taskrun = params.flags & IORING_SETUP_DEFER_TASKRUN;
            features_.coop_taskrun = params.flags & IORING_SETUP_COOP_TASKRUN;
            features_.submit_all = params.flags & IORING_SETUP_SUBMIT_ALL;
            features_.recvsend_bundle = params.features & kFeatRecvSendBundle;
            features_.sq_entries = params.sq_entries;
            features_.cq_entries = params.cq_entries;
            ok = true;
            break;
        }
        last_error = -ret;
        if (last_error != EINVAL)
            break; // not a flag problem: no point in trying weaker flags
    }
    if (!ok)
        throw_unavailable(last_error);
    // A registered ring fd saves an fget/fput on every io_uring_enter (5.18).
    features_.registered_ring_fd = io_uring_register_ring_fd(&state_->ring) == 1;
    batch_.reserve(features_.cq_entries);
}

Ring::~Ring() {
    io_uring_queue_exit(&state_->ring);
}

io_uring_sqe* Ring::next_sqe() {
    io_uring_sqe* sqe = io_uring_get_sqe(&state_->ring);
    while (sqe == nullptr) {
        // The submission queue is full: hand what we have to the kernel now. This is
        // rare (the queue is sized for a full batch) and costs one extra syscall. It
        // would split a chain whose head is already prepared; reserve() is what keeps
        // chains from ever getting here.
        ++counters_.enters;
        io_uring_submit(&state_->ring);
        sqe = io_uring_get_sqe(&state_->ring);
    }
    return sqe;
}

void Ring::reserve(unsigned entries) {
    // A link chain only exists within one submission: io_submit_sqes() ends with
    // io_submit_state_end() (io_uring/io_uring.c), which queues an unfinished chain
    // (a head still flagged IOSQE_IO_LINK/HARDLINK with no tail yet) as it stands, to
    // an io-wq worker since 5.19 (io_queue_sqe_fallback()). The rest, submitted next
    // time, starts fresh: a hard-linked splice pair then runs as two unordered splices,
    // and a lone LINK_TIMEOUT fails with -EINVAL because no chain is being built
    // (__io_timeout_prep() in io_uring/timeout.c), leaving its connect without a
    // timeout; that connect, issued blocking by the worker on a non-blocking socket,
    // even completes with -EINPROGRESS. So the whole chain must fit in what is left of
    // the submission queue before its first entry is prepared; next_sqe() then never
    // has to submit in the middle of it.
    if (entries > features_.sq_entries)
        throw std::logic_error(fmt::format(
            "Ring::reserve({}): a chain longer than the submission queue ({}) cannot reach "
            "the kernel in one submission",
            entries, features_.sq_entries));
    while (io_uring_sq_space_left(&state_->ring) < entries) {
        // Like next_sqe(): rare, and one extra syscall. Without SQPOLL the kernel
        // consumes the entries during the call, so one round normally frees the whole
        // queue; a transient failure (-EINTR, -EAGAIN, -EBUSY) is retried, as there.
        ++counters_.enters;
        io_uring_submit(&state_->ring);
    }
}

unsigned Ring::prepared() const {
    return io_uring_sq_ready(&state_->ring);
}

namespace {
void apply_link(io_uring_sqe* sqe, Link link) {
    if (link == Link::Soft)
        sqe->flags |= IOSQE_IO_LINK;
    else if (link == Link::Hard)
        sqe->flags |= IOSQE_IO_HARDLINK;
}

// IOSQE_FIXED_FILE: the operation's fd is a slot of the registered table.
void set_file(io_uring_sqe* sqe, FileRef fd) {
    sqe->fd = fd.index;
    if (fd.fixed)
        sqe->flags |= IOSQE_FIXED_FILE;
}

__kernel_timespec to_timespec(std::chrono::nanoseconds d) {
    __kernel_timespec ts{};
    ts.tv_sec = d.count() / 1'000'000'000;
    ts.tv_nsec = d.count() % 1'000'000'000;
    return ts;
}
} // namespace

void Ring::poll(FileRef fd, unsigned events, uint64_t user_data) {
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_poll_add(sqe, fd.index, events);
    set_file(sqe, fd);
    io_uring_sqe_set_data64(sqe, user_data);
}

void Ring::poll_multishot(FileRef fd, unsigned events, uint64_t user_data) {
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_poll_multishot(sqe, fd.index, events);
    set_file(sqe, fd);
    io_uring_sqe_set_data64(sqe, user_data);
}

void Ring::splice(FileRef fd_in, FileRef fd_out, unsigned len, unsigned splice_flags,
                  uint64_t user_data, Link link) {
    io_uring_sqe* sqe = next_sqe();
    // fd_out is the SQE's own fd (IOSQE_FIXED_FILE); fd_in travels in splice_fd_in and
    // is marked fixed by SPLICE_F_FD_IN_FIXED (io_uring/splice.c io_splice_get_file).
    if (fd_in.fixed)
        splice_flags |= SPLICE_F_FD_IN_FIXED;
    io_uring_prep_splice(sqe, fd_in.index, -1, fd_out.index, -1, len, splice_flags);
    set_file(sqe, fd_out);
    io_uring_sqe_set_data64(sqe, user_data);
    apply_link(sqe, link);
}

void Ring::recv_provided(FileRef fd, uint16_t group, uint64_t user_data) {
    io_uring_sqe* sqe = next_sqe();
    // Length 0: the picked buffer's own size.
    io_uring_prep_recv(sqe, fd.index, nullptr, 0, 0);
    set_file(sqe, fd);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = group;
    io_uring_sqe_set_data64(sqe, user_data);
}

void Ring::recv_bundle(FileRef fd, uint16_t group, std::size_t max_len, uint64_t user_data) {
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_recv(sqe, fd.index, nullptr, max_len, 0);
    set_file(sqe, fd);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = group;
    sqe->ioprio |= kRecvSendBundle;
    io_uring_sqe_set_data64(sqe, user_data);
}

void Ring::sendmsg(FileRef fd, const struct msghdr* msg, int msg_flags, uint64_t user_data) {
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_sendmsg(sqe, fd.index, msg, static_cast<unsigned>(msg_flags));
    set_file(sqe, fd);
    io_uring_sqe_set_data64(sqe, user_data);
}

void Ring::send(FileRef fd, const void* data, std::size_t len, int msg_flags, uint64_t user_data,
                Link link) {
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_send(sqe, fd.index, data, len, msg_flags);
    set_file(sqe, fd);
    io_uring_sqe_set_data64(sqe, user_data);
    apply_link(sqe, link);
}

void Ring::recv(FileRef fd, void* buf, std::size_t len, int msg_flags, uint64_t user_data,
                Link link) {
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_recv(sqe, fd.index, buf, len, msg_flags);
    set_file(sqe, fd);
    io_uring_sqe_set_data64(sqe, user_data);
    apply_link(sqe, link);
}

void Ring::accept_multishot(int listen_fd, uint64_t user_data) {
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_multishot_accept(sqe, listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    io_uring_sqe_set_data64(sqe, user_data);
}

void Ring::connect(FileRef fd, const sockaddr* addr, socklen_t len, uint64_t user_data, Link link) {
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_connect(sqe, fd.index, addr, len);
    set_file(sqe, fd);
    io_uring_sqe_set_data64(sqe, user_data);
    apply_link(sqe, link);
}

void Ring::link_timeout(std::chrono::nanoseconds timeout, uint64_t user_data) {
    __kernel_timespec& ts = state_->timespecs.emplace_back(to_timespec(timeout));
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_link_timeout(sqe, &ts, 0);
    io_uring_sqe_set_data64(sqe, user_data);
}

void Ring::timeout(std::chrono::nanoseconds timeout, uint64_t user_data) {
    __kernel_timespec& ts = state_->timespecs.emplace_back(to_timespec(timeout));
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_timeout(sqe, &ts, 0, 0);
    io_uring_sqe_set_data64(sqe, user_data);
}

void Ring::cancel_fd(FileRef fd, uint64_t user_data) {
    io_uring_sqe* sqe = next_sqe();
    // A slot is matched as a slot (IORING_ASYNC_CANCEL_FD_FIXED, 6.0): the cancel
    // itself has no file, so IOSQE_FIXED_FILE is not the way to say it.
    io_uring_prep_cancel_fd(
        sqe, fd.index, IORING_ASYNC_CANCEL_ALL | (fd.fixed ? IORING_ASYNC_CANCEL_FD_FIXED : 0));
    io_uring_sqe_set_data64(sqe, user_data);
}

void Ring::cancel(uint64_t target, uint64_t user_data) {
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_cancel64(sqe, target, 0);
    io_uring_sqe_set_data64(sqe, user_data);
}

std::span<const Completion> Ring::submit_and_wait(unsigned min_completions,
                                                  std::chrono::nanoseconds spin) {
    batch_.clear();
    if (spin.count() > 0 && min_completions > 0) {
        // Poll before sleeping: each round submits, runs the completion work the kernel
        // has queued for us (DEFER_TASKRUN defers it to our next entry, so only an
        // entry makes completions visible) and reaps, without ever blocking. A shard
        // that never sleeps is never woken: no inter-processor interrupt, no exit from
        // an idle state, which on a VM is most of a small message's round trip.
        auto deadline = std::chrono::steady_clock::now() + spin;
        do {
            ++counters_.enters;
            io_uring_submit_and_get_events(&state_->ring);
            forget_submitted_timespecs();
            reap();
            if (!batch_.empty())
                return batch_;
        } while (std::chrono::steady_clock::now() < deadline);
    }
    ++counters_.enters;
    // -EINTR (a signal) and -EBUSY/-EAGAIN (completion queue backed up) are not
    // errors here: whatever completions exist are reaped below, and what was not
    // submitted stays queued for the next call.
    io_uring_submit_and_wait(&state_->ring, min_completions);
    forget_submitted_timespecs();
    reap();
    return batch_;
}

void Ring::forget_submitted_timespecs() {
    if (io_uring_sq_ready(&state_->ring) == 0)
        state_->timespecs.clear();
}

void Ring::reap() {
    std::size_t before = batch_.size();
    unsigned head = 0;
    io_uring_cqe* cqe = nullptr;
    io_uring_for_each_cqe(&state_->ring, head, cqe) {
        batch_.push_back(Completion{cqe->user_data, cqe->res, cqe->flags});
    }
    // One store to the CQ head for the whole batch.
    io_uring_cq_advance(&state_->ring, static_cast<unsigned>(batch_.size() - before));
    counters_.completions += batch_.size() - before;
}

int Ring::set_worker_affinity(const std::vector<int>& cpus) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int cpu : cpus)
        CPU_SET(cpu, &set);
    return io_uring_register_iowq_aff(&state_->ring, sizeof(set), &set);
}

int Ring::run_on_worker() {
    constexpr uint64_t kWorkerNopTag = ~uint64_t{0};
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_nop(sqe);
    // Queued to io-wq with no inline attempt (io_uring/io_uring.c io_queue_sqe_fallback
    // -> io_queue_iowq).
    sqe->flags |= IOSQE_ASYNC;
    io_uring_sqe_set_data64(sqe, kWorkerNopTag);
    for (;;)
        for (const Completion& c : submit_and_wait(1))
            if (c.user_data == kWorkerNopTag)
                return c.result;
}

int Ring::set_worker_limits(unsigned bounded, unsigned unbounded) {
    unsigned values[2] = {bounded, unbounded};
    return io_uring_register_iowq_max_workers(&state_->ring, values);
}

} // namespace uringfwd::uring
