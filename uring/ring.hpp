// A small C++ face for one io_uring instance: setup with the best flags the kernel
// accepts, typed preparation of the few operations a forwarder needs, and batched
// completion reaping. Nothing here knows about connections or forwarding; callers tag
// every operation with an opaque 64-bit value and get it back in its Completion.
#pragma once

#include "uring/file_ref.hpp"

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

struct io_uring_sqe; // liburing stays out of this header on purpose

namespace uringfwd::uring {

// Setting up the ring failed. The message says why and, where it can, what to do.
class RingError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct Completion {
    uint64_t user_data;
    int32_t result; // >= 0 success value, < 0 negated errno
    uint32_t flags;

    // Another completion will follow for this multishot request.
    bool more() const;
    // The provided buffer the kernel filled, for a receive with buffer selection.
    std::optional<uint16_t> buffer() const;
};

// How a prepared operation relates to the one prepared right after it.
enum class Link {
    None,
    // The next operation runs only if this one returns exactly what it asked for.
    Soft,
    // The next operation runs after this one whatever it returned (IOSQE_IO_HARDLINK):
    // the right choice for splice pairs, where a short first splice is normal
    // (docs/kernel.md §3).
    Hard,
};

struct RingFeatures {
    bool single_issuer = false;
    bool defer_taskrun = false;
    bool coop_taskrun = false;
    bool submit_all = false;
    bool registered_ring_fd = false;
    // Receives (and sends) may fill several provided buffers at once
    // (IORING_FEAT_RECVSEND_BUNDLE, 6.10): see recv_bundle().
    bool recvsend_bundle = false;
    unsigned sq_entries = 0;
    unsigned cq_entries = 0;

    std::string describe() const;
};

struct RingCounters {
    uint64_t enters = 0;      // calls into the kernel that submit and/or wait
    uint64_t completions = 0; // CQEs reaped
};

class Ring {
public:
    // entries: submission queue size; the completion queue gets four times as many.
    // Throws RingError.
    explicit Ring(unsigned entries);
    ~Ring();
    Ring(const Ring&) = delete;
    Ring& operator=(const Ring&) = delete;

    // One-shot poll; completes with the ready mask. The kernel always adds POLLERR,
    // POLLHUP and POLLRDHUP to `events` (io_uring/poll.c io_init_poll_iocb,
    // IO_POLL_UNMASK), so a socket that received FIN completes any poll at once.
    void poll(FileRef fd, unsigned events, uint64_t user_data);

    // Multishot poll: a completion per wake-up that matches, each with more() set
    // until the last. Level-checked when armed, edge-triggered after
    // (docs/kernel.md §2.3).
    void poll_multishot(FileRef fd, unsigned events, uint64_t user_data);

    // splice(2) from fd_in to fd_out, neither with an offset. With a link other than
    // None this is the first entry of a chain: reserve() the whole chain first, or a
    // full submission queue may split it and the link is lost (see reserve()).
    void splice(FileRef fd_in, FileRef fd_out, unsigned len, unsigned splice_flags,
                uint64_t user_data, Link link = Link::None);

    // One receive into a buffer the kernel picks from provided-buffer group `group`
    // when data arrives (see ProvidedBuffers): waiting holds no memory. Runs inline:
    // with no data queued, io_uring arms its internal poll instead of an io-wq worker
    // (docs/kernel.md §8). The completion's buffer() names the buffer; -ENOBUFS when
    // the group was empty, and the data is then still in the socket.
    void recv_provided(FileRef fd, uint16_t group, uint64_t user_data);

    // A receive bundle (IORING_RECVSEND_BUNDLE, 6.10; only where
    // features().recvsend_bundle): the kernel fills as many buffers of `group` as the
    // socket has data for, in ring order, and the completion names the first;
    // ProvidedBuffers::take_bundle() finds the others. `max_len` caps the bytes (0: no
    // cap); kernels before about 6.13 heed it only when they retry (docs/kernel.md §8.2).
    void recv_bundle(FileRef fd, uint16_t group, std::size_t max_len, uint64_t user_data);

    // sendmsg(2) of `msg`, which (with its iovec) must stay valid until the completion.
    // Inline like send().
    void sendmsg(FileRef fd, const struct msghdr* msg, int msg_flags, uint64_t user_data);

    // send(2) of data[0, len), which must stay valid until the completion. Inline like
    // recv_provided; may complete short. With a link other than None (e.g. followed by
    // link_timeout()) this is the first entry of a chain: reserve() the whole chain first.
    void send(FileRef fd, const void* data, std::size_t len, int msg_flags, uint64_t user_data,
              Link link = Link::None);

    // recv(2) into buf[0, len), which must stay valid until the completion. Completes
    // with the bytes received (possibly fewer than len), 0 at end of stream, or a
    // negated errno. Inline like recv_provided: with nothing queued io_uring arms its
    // internal poll, not an io-wq worker (docs/kernel.md §8). With a link other than
    // None (e.g. followed by link_timeout()) this is the first entry of a chain:
    // reserve() the whole chain first.
    void recv(FileRef fd, void* buf, std::size_t len, int msg_flags, uint64_t user_data,
              Link link = Link::None);

    // Multishot accept; new sockets come back non-blocking and close-on-exec.
    void accept_multishot(int listen_fd, uint64_t user_data);

    // addr must stay valid until the next wait(): the kernel copies it at submission.
    // With a link other than None (e.g. followed by link_timeout()) this is the first
    // entry of a chain: reserve() the whole chain first, or a full submission queue may
    // split it and the timeout is lost (see reserve()).
    void connect(FileRef fd, const sockaddr* addr, socklen_t len, uint64_t user_data,
                 Link link = Link::None);

    // Cancels the preceding linked operation if it has not completed within timeout.
    // Must reach the kernel in the same submission as that operation (reserve()):
    // alone, it completes with -EINVAL.
    void link_timeout(std::chrono::nanoseconds timeout, uint64_t user_data);

    // Completes with -ETIME after timeout.
    void timeout(std::chrono::nanoseconds timeout, uint64_t user_data);

    // Cancels every pending operation whose file is fd; completes with the number
    // cancelled or -ENOENT.
    void cancel_fd(FileRef fd, uint64_t user_data);

    // The same with plain fds.
    void poll(int fd, unsigned events, uint64_t user_data) {
        poll(FileRef::plain(fd), events, user_data);
    }
    void poll_multishot(int fd, unsigned events, uint64_t user_data) {
        poll_multishot(FileRef::plain(fd), events, user_data);
    }
    void splice(int fd_in, int fd_out, unsigned len, unsigned splice_flags, uint64_t user_data,
                Link link = Link::None) {
        splice(FileRef::plain(fd_in), FileRef::plain(fd_out), len, splice_flags, user_data, link);
    }
    void recv_provided(int fd, uint16_t group, uint64_t user_data) {
        recv_provided(FileRef::plain(fd), group, user_data);
    }
    void recv_bundle(int fd, uint16_t group, std::size_t max_len, uint64_t user_data) {
        recv_bundle(FileRef::plain(fd), group, max_len, user_data);
    }
    void send(int fd, const void* data, std::size_t len, int msg_flags, uint64_t user_data,
              Link link = Link::None) {
        send(FileRef::plain(fd), data, len, msg_flags, user_data, link);
    }
    void recv(int fd, void* buf, std::size_t len, int msg_flags, uint64_t user_data,
              Link link = Link::None) {
        recv(FileRef::plain(fd), buf, len, msg_flags, user_data, link);
    }
    void connect(int fd, const sockaddr* addr, socklen_t len, uint64_t user_data,
                 Link link = Link::None) {
        connect(FileRef::plain(fd), addr, len, user_data, link);
    }
    void cancel_fd(int fd, uint64_t user_data) { cancel_fd(FileRef::plain(fd), user_data); }

    // ---- registered (direct) descriptors; every method above takes a FileRef that
    // may name a slot of this table.

    // Registers a sparse file table of `slots` entries (io_uring_register_files_sparse,
    // 5.19). The kernel checks each registration against RLIMIT_NOFILE on its own
    // (io_uring/rsrc.c io_sqe_files_register: nr_args > rlimit(RLIMIT_NOFILE) ->
    // -EMFILE), not added up over rings. Returns 0 or a negated errno.
    int register_file_table(unsigned slots);
    unsigned file_table_slots() const { return file_table_slots_; }

    // Checks, on a registered table, every piece direct descriptors need from this
    // kernel by using it once: a socket created into a slot the kernel picks
    // (IORING_OP_SOCKET with IORING_FILE_INDEX_ALLOC, 5.19), a setsockopt through
    // IORING_OP_URING_CMD (SOCKET_URING_OP_SETSOCKOPT, 6.7) and a close of the slot.
    // Call before anything else is submitted; it waits for its own completions.
    // Returns what is missing, or an empty string.
    std::string probe_direct();

    // One accept into a slot the kernel picks; the completion's result is the slot.
    // addr and len must stay valid until the completion: the peer's address is
    // written there, which a multishot accept cannot do per connection. New sockets
    // are non-blocking (no SOCK_CLOEXEC: io_uring/net.c io_accept_prep refuses it with
    // a fixed slot, and a slot is never inherited by exec anyway).
    void accept_direct(FileRef listen_fd, sockaddr* addr, socklen_t* len, uint64_t user_data);

    // socket(2) into a slot the kernel picks (non-blocking); result: the slot, or
    // -ENFILE when the table is full.
    void socket_direct(int domain, int type, int protocol, uint64_t user_data);

    // setsockopt(2) through IORING_OP_URING_CMD (SOCKET_URING_OP_SETSOCKOPT, 6.7,
    // io_uring/cmd_net.c io_uring_cmd_setsockopt). value must stay valid until the
    // completion.
    void setsockopt(FileRef fd, int level, int optname, const void* value, int len,
                    uint64_t user_data, Link link = Link::None);

    // shutdown(2) (IORING_OP_SHUTDOWN, 5.11).
    void shutdown(FileRef fd, int how, uint64_t user_data);

    // A plain fd (close-on-exec) for the socket in `slot`, next to it in the process's
    // fd table (IORING_OP_FIXED_FD_INSTALL, 6.8: io_uring/openclose.c
    // io_install_fixed_fd, which runs inline, never on io-wq). The result is the fd;
    // the caller closes it.
    void install_fd(unsigned slot, uint64_t user_data);

    // Closes a slot of the file table (IORING_OP_CLOSE with a file index, 5.15).
    void close_direct(unsigned slot, uint64_t user_data);

    // Puts the files of the plain fds fds[0..count) into free slots the kernel picks
    // (IORING_OP_FILES_UPDATE with IORING_FILE_INDEX_ALLOC, 5.19: io_uring/rsrc.c
    // io_files_update_with_index_alloc, run inline). The result is how many it put,
    // in order, or the error that stopped the first (-ENFILE: no slot free); it writes
    // each one's slot over its fd in `fds`, which must live until the completion. The
    // plain fds stay open: the slots hold the files too, and the caller closes them.
    void move_into_slots(int* fds, unsigned count, uint64_t user_data);

    // Cancels the operation tagged target.
    void cancel(uint64_t target, uint64_t user_data);

    // Makes room for `entries` submission queue entries, submitting what is already
    // prepared if there is not enough free space, so that a chain of that many linked
    // entries prepared next reaches the kernel in one submission. Call it before the
    // first entry of every chain (a connect and its link_timeout, a hard-linked splice
    // pair). Throws std::logic_error if entries exceeds the submission queue size.
    void reserve(unsigned entries);

    // Entries prepared but not yet submitted to the kernel.
    unsigned prepared() const;

    // Submits everything prepared, waits for at least min_completions (0 = don't wait),
    // and returns every completion that is ready: one syscall, many CQEs. The span is
    // valid until the next call. With a `spin`, it first polls without sleeping for up
    // to that long and returns as soon as any completion is ready (a syscall per poll:
    // latency bought with CPU).
    std::span<const Completion> submit_and_wait(unsigned min_completions = 1,
                                                std::chrono::nanoseconds spin = {});

    // Restricts this thread's io-wq workers to cpus (IORING_REGISTER_IOWQ_AFF).
    // Returns 0 or a negated errno.
    int set_worker_affinity(const std::vector<int>& cpus);
    // Caps io-wq workers (bounded, unbounded; 0 = keep). Returns 0 or negated errno.
    int set_worker_limits(unsigned bounded, unsigned unbounded);
    // Runs one nop on an io-wq worker (IOSQE_ASYNC) and waits for it, so that a worker
    // of this thread exists afterwards (io-wq creates one when none is idle; an idle
    // one exits after 5 s, io_uring/io-wq.c WORKER_IDLE_TIMEOUT). Call it before
    // anything else is submitted, as probe_direct(). Returns the nop's result.
    int run_on_worker();

    const RingFeatures& features() const { return features_; }
    const RingCounters& counters() const { return counters_; }

private:
    friend class ProvidedBuffers; // registers its ring on ours
    io_uring_sqe* next_sqe();
    void reap(); // appends every ready completion to batch_
    void forget_submitted_timespecs();
    struct State; // the io_uring and what the kernel reads at submission
    State& state() { return *state_; }
    std::unique_ptr<State> state_;
    RingFeatures features_;
    RingCounters counters_;
    unsigned file_table_slots_ = 0;
    std::vector<Completion> batch_;
};

} // namespace uringfwd::uring
