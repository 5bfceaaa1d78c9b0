// The loop-and-I/O layer under a shard: its io_uring, the tags that name what each
// operation belongs to, the count of what every owner (a listener, a connection, the
// shard itself) still has in flight, timers and the shard's counters. The shard's
// owners submit only through here, so every submission is counted in one place and
// a chain of linked operations always reaches the kernel whole.
#pragma once

#include "net/socket_address.hpp"
#include "shard/loop/op_tag.hpp"
#include "shard/loop/shard_counters.hpp"
#include "uring/ring.hpp"

#include <chrono>
#include <cstdint>
#include <span>

namespace uringfwd::engine {

// What an owner has submitted and not yet seen the last completion of. A multishot
// operation counts once, until the completion without IORING_CQE_F_MORE. An owner
// may go away only when this is zero: the kernel may still hold its fds or buffers.
struct InFlight {
    unsigned ops = 0;
    bool idle() const { return ops == 0; }
};

class ShardIo {
public:
    // Creates the ring; call on the shard's own thread (SINGLE_ISSUER makes that
    // thread its only submitter). Throws uring::RingError.
    ShardIo(unsigned ring_entries, ShardCounters& counters);

    uring::Ring& ring() { return ring_; }
    ShardCounters& counters() { return counters_; }

    // Every operation names its owner's in-flight count and its tag.
    void poll(InFlight& owner, OpTag tag, uring::FileRef fd, unsigned events);
    void poll_multishot(InFlight& owner, OpTag tag, uring::FileRef fd, unsigned events);
    void accept_multishot(InFlight& owner, OpTag tag, int listen_fd);
    // A connect soft-linked to a timeout, submitted together: whichever ends first
    // cancels the other, and a timed-out connect completes with -ECANCELED. `to`
    // must stay valid until the next submit_and_wait().
    void connect_with_timeout(InFlight& owner, OpTag connect, OpTag timeout, uring::FileRef fd,
                              const SocketAddress& to, std::chrono::milliseconds limit);
    // A socket->pipe splice hard-linked to a pipe->socket splice, submitted together.
    void splice_pair(InFlight& owner, OpTag first, OpTag second, uring::FileRef src, int pipe_write,
                     int pipe_read, uring::FileRef dst, unsigned len, unsigned flags);
    void splice(InFlight& owner, OpTag tag, uring::FileRef fd_in, uring::FileRef fd_out,
                unsigned len, unsigned flags);
    void recv_provided(InFlight& owner, OpTag tag, uring::FileRef fd, uint16_t group);
    void recv_bundle(InFlight& owner, OpTag tag, uring::FileRef fd, uint16_t group,
                     std::size_t max_len);
    void sendmsg(InFlight& owner, OpTag tag, uring::FileRef fd, const msghdr* msg, int msg_flags);
    // A recv into `buf` soft-linked to a timeout, submitted together, as
    // connect_with_timeout(): a recv that outlives `limit` completes with -ECANCELED.
    void recv_with_timeout(InFlight& owner, OpTag recv, OpTag timeout, uring::FileRef fd, void* buf,
                           std::size_t len, std::chrono::milliseconds limit);
    void send(InFlight& owner, OpTag tag, uring::FileRef fd, const void* data, std::size_t len,
              int msg_flags);
    // A timer: completes with -ETIME after `after`, or -ECANCELED.
    void timeout(InFlight& owner, OpTag tag, std::chrono::microseconds after);
    void cancel(InFlight& owner, OpTag target, OpTag tag);
    // Cancels every operation on fd; a walk of the ring's whole poll table, so only for
    // operations that cannot be named by tag.
    void cancel_fd(InFlight& owner, uring::FileRef fd, OpTag tag);

    // Registered (direct) descriptors (uring::Ring). Each counts as the others do.
    void accept_direct(InFlight& owner, OpTag tag, int listen_fd, sockaddr* addr, socklen_t* len);
    void socket_direct(InFlight& owner, OpTag tag, int domain);
    // `value` must outlive the submission (a constant).
    void setsockopt(InFlight& owner, OpTag tag, uring::FileRef fd, int level, int optname,
                    const void* value, int len);
    void shutdown(InFlight& owner, OpTag tag, uring::FileRef fd, int how);
    void install_fd(InFlight& owner, OpTag tag, uring::FileRef fd);
    // SO_LINGER {1, 0} first when `reset` (the peer gets a reset, as
    // set_reset_on_close() does for a plain fd), hard-linked to the close so the slot
    // is freed whatever the setsockopt answered.
    void close_direct(InFlight& owner, OpTag tag, uring::FileRef fd, bool reset);
    // Ring::move_into_slots: `fds` must live until the completion.
    void move_into_slots(InFlight& owner, OpTag tag, int* fds, unsigned count);

    // Submits what is prepared and returns the completions that are ready after
    // waiting for at least one. With `busy_poll`, polls that long before sleeping,
    // unless a splice is in flight (see the definition).
    std::span<const uring::Completion> submit_and_wait(std::chrono::microseconds busy_poll);

    // Accounts for a completion: the owner has one operation less in flight once its
    // last completion is in. Call once for every completion, before acting on it.
    void completed(InFlight& owner, const OpTag& tag, const uring::Completion& c) {
        if (!c.more())
            --owner.ops;
        if (is_splice(tag.op))
            --splices_in_flight_;
    }

    // Directions with a parked source (bulk_park): their splices may wait in the kernel
    // for up to bulk_park, so the loop must not wait for two completions.
    void set_parked(unsigned directions) { parked_ = directions; }

    // Copies the ring's enter and completion counts into the shard's counters.
    void publish_counters();

private:
    uring::Ring ring_;
    ShardCounters& counters_;
    unsigned splices_in_flight_ = 0; // submitted, completion not yet seen
    unsigned parked_ = 0;
};

} // namespace uringfwd::engine
