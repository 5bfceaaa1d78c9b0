#include "shard/loop/shard_io.hpp"

#include <sys/socket.h>

namespace uringfwd::engine {

ShardIo::ShardIo(unsigned ring_entries, ShardCounters& counters)
    : ring_(ring_entries), counters_(counters) {}

void ShardIo::poll(InFlight& owner, OpTag tag, uring::FileRef fd, unsigned events) {
    ring_.poll(fd, events, tag.encode());
    ++owner.ops;
}

void ShardIo::poll_multishot(InFlight& owner, OpTag tag, uring::FileRef fd, unsigned events) {
    ring_.poll_multishot(fd, events, tag.encode());
    ++owner.ops;
}

void ShardIo::accept_multishot(InFlight& owner, OpTag tag, int listen_fd) {
    ring_.accept_multishot(listen_fd, tag.encode());
    ++owner.ops;
}

void ShardIo::connect_with_timeout(InFlight& owner, OpTag connect, OpTag timeout, uring::FileRef fd,
                                   const SocketAddress& to, std::chrono::milliseconds limit) {
    // Both in one submission: a link ends where a submission ends, so a connect whose
    // timeout went to the kernel in the next one would have no timeout at all.
    ring_.reserve(2);
    ring_.connect(fd, to.get(), to.length, connect.encode(), uring::Link::Soft);
    ring_.link_timeout(limit, timeout.encode());
    owner.ops += 2;
}

void ShardIo::splice_pair(InFlight& owner, OpTag first, OpTag second, uring::FileRef src,
                          int pipe_write, int pipe_read, uring::FileRef dst, unsigned len,
                          unsigned flags) {
    // Hard link: the second splice runs even when the first moves less than `len`,
    // which is the normal case; a soft link would cancel it (docs/kernel.md §3). Both
    // go in one submission, for the reason given in connect_with_timeout().
    ring_.reserve(2);
    // Pipes are always plain fds.
    ring_.splice(src, uring::FileRef::plain(pipe_write), len, flags, first.encode(),
                 uring::Link::Hard);
    ring_.splice(uring::FileRef::plain(pipe_read), dst, len, flags, second.encode());
    owner.ops += 2;
    splices_in_flight_ += 2;
}

void ShardIo::splice(InFlight& owner, OpTag tag, uring::FileRef fd_in, uring::FileRef fd_out,
                     unsigned len, unsigned flags) {
    ring_.splice(fd_in, fd_out, len, flags, tag.encode());
    ++owner.ops;
    ++splices_in_flight_;
}

void ShardIo::recv_provided(InFlight& owner, OpTag tag, uring::FileRef fd, uint16_t group) {
    ring_.recv_provided(fd, group, tag.encode());
    ++owner.ops;
}

void ShardIo::recv_bundle(InFlight& owner, OpTag tag, uring::FileRef fd, uint16_t group,
                          std::size_t max_len) {
    ring_.recv_bundle(fd, group, max_len, tag.encode());
    ++owner.ops;
}

void ShardIo::sendmsg(InFlight& owner, OpTag tag, uring::FileRef fd, const msghdr* msg,
                      int msg_flags) {
    ring_.sendmsg(fd, msg, msg_flags, tag.encode());
    ++owner.ops;
}

void ShardIo::recv_with_timeout(InFlight& owner, OpTag recv, OpTag timeout, uring::FileRef fd,
                                void* buf, std::size_t len, std::chrono::milliseconds limit) {
    ring_.reserve(2);
    ring_.recv(fd, buf, len, 0, recv.encode(), uring::Link::Soft);
    ring_.link_timeout(limit, timeout.encode());
    owner.ops += 2;
}

void ShardIo::send(InFlight& owner, OpTag tag, uring::FileRef fd, const void* data, std::size_t len,
                   int msg_flags) {
    ring_.send(fd, data, len, msg_flags, tag.encode());
    ++owner.ops;
}

void ShardIo::timeout(InFlight& owner, OpTag tag, std::chrono::microseconds after) {
    ring_.timeout(after, tag.encode());
    ++owner.ops;
}

void ShardIo::cancel(InFlight& owner, OpTag target, OpTag tag) {
    ring_.cancel(target.encode(), tag.encode());
    ++owner.ops;
}

void ShardIo::cancel_fd(InFlight& owner, uring::FileRef fd, OpTag tag) {
    ring_.cancel_fd(fd, tag.encode());
    ++owner.ops;
}

void ShardIo::accept_direct(InFlight& owner, OpTag tag, int listen_fd, sockaddr* addr,
                            socklen_t* len) {
    ring_.accept_direct(uring::FileRef::plain(listen_fd), addr, len, tag.encode());
    ++owner.ops;
}

void ShardIo::socket_direct(InFlight& owner, OpTag tag, int domain) {
    ring_.socket_direct(domain, SOCK_STREAM, 0, tag.encode());
    ++owner.ops;
}

void ShardIo::setsockopt(InFlight& owner, OpTag tag, uring::FileRef fd, int level, int optname,
                         const void* value, int len) {
    ring_.setsockopt(fd, level, optname, value, len, tag.encode());
    ++owner.ops;
}

void ShardIo::shutdown(InFlight& owner, OpTag tag, uring::FileRef fd, int how) {
    ring_.shutdown(fd, how, tag.encode());
    ++owner.ops;
}

void ShardIo::install_fd(InFlight& owner, OpTag tag, uring::FileRef fd) {
    ring_.install_fd(static_cast<unsigned>(fd.index), tag.encode());
    ++owner.ops;
}

void ShardIo::move_into_slots(InFlight& owner, OpTag tag, int* fds, unsigned count) {
    ring_.move_into_slots(fds, count, tag.encode());
    ++owner.ops;
}

void ShardIo::close_direct(InFlight& owner, OpTag tag, uring::FileRef fd, bool reset) {
    static const linger kResetLinger{1, 0};
    if (reset) {
        ring_.reserve(2); // one chain, one submission (see connect_with_timeout())
        ring_.setsockopt(fd, SOL_SOCKET, SO_LINGER, &kResetLinger, sizeof(kResetLinger),
                         tag.encode(), uring::Link::Hard);
        ++owner.ops;
    }
    ring_.close_direct(static_cast<unsigned>(fd.index), tag.encode());
    ++owner.ops;
}

std::span<const uring::Completion> ShardIo::submit_and_wait(std::chrono::microseconds busy_poll) {
    // Splices are non-blocking, so each one in flight completes soon. With two or more
    // outstanding, waiting for two means a hard-linked pair comes back in one wake-up
    // instead of two (DEFER_TASKRUN wakes us only when that many completions are
    // queued); waiting for more would hold finished work back.
    // A parked splice (bulk_park) completes only when data comes or its timeout runs
    // out: waiting for two could hold a lone completion back that long.
    unsigned wait_for = splices_in_flight_ >= 2 && parked_ == 0 ? 2 : 1;
    // Busy polling only while no splice is in flight: a splice completes on an io-wq
    // worker pinned to this same CPU, and a shard spinning on it would keep that
    // worker from running (measured: one bulk stream fell from 13.6 to 7.7 Gbit/s when
    // it did).
    std::chrono::microseconds spin =
        splices_in_flight_ == 0 ? busy_poll : std::chrono::microseconds{0};
    return ring_.submit_and_wait(wait_for, spin);
}

void ShardIo::publish_counters() {
    set(counters_.enters, ring_.counters().enters);
    set(counters_.completions, ring_.counters().completions);
}

} // namespace uringfwd::engine
