// bulk_park (EngineConfig::experimental): a bulk direction whose splices wait in the kernel for
// data, on their io-wq worker, instead of returning EAGAIN and being gated by a poll. What a
// blocking splice loop does, inside io_uring (docs/kernel.md §1.8). Experimental and
// off by default until it measures cheaper.
#include "shard/directions/directions.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/time.h>

namespace uringfwd::engine {

namespace {

bool set_timeouts(int fd, std::chrono::milliseconds wait) {
    timeval tv{static_cast<time_t>(wait.count() / 1000),
               static_cast<suseconds_t>(wait.count() % 1000 * 1000)};
    return ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0 &&
           ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) == 0;
}

bool set_blocking(int fd, bool blocking) {
    int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0)
        return false;
    int wanted = blocking ? flags & ~O_NONBLOCK : flags | O_NONBLOCK;
    return wanted == flags || ::fcntl(fd, F_SETFL, wanted) == 0;
}

// Only a TCP source parks: AF_UNIX takes SPLICE_F_NONBLOCK, which the engine passes and
// an O_NONBLOCK pipe implies anyway, so its splices never wait (§2.1).
bool is_tcp(int fd) {
    int domain = 0;
    socklen_t len = sizeof(domain);
    return ::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 &&
           (domain == AF_INET || domain == AF_INET6);
}

} // namespace

// A parked splice holds its io-wq worker for up to bulk_park. Every splice, parked or
// not, holds a leased pipe, so with the default cap (max_pipes + 4) a worker is always
// free for a ready splice (§1.4). Under a smaller explicit cap, at most half of what
// is left after two spare workers may park: each parked socket can hold two workers,
// its own direction's splice waiting for data and the other direction's waiting for
// room in it (O_NONBLOCK belongs to the open file, which both directions share).
unsigned Directions::park_limit() const {
    auto pipes = static_cast<unsigned>(shard_.config.splice.max_pipes);
    unsigned cap = shard_.config.placement.iowq_max_workers != 0
                       ? shard_.config.placement.iowq_max_workers
                       : pipes + 4;
    if (cap >= pipes + 2)
        return pipes;
    return cap > 2 ? (cap - 2) / 2 : 0;
}

void Directions::park(Connection& conn, Side side) {
    Direction& dir = conn.dir(side);
    if (dir.parked || shard_.config.experimental.bulk_park.count() <= 0 ||
        parked_now_ >= park_limit() || dir.src.fixed || !is_tcp(dir.src.index))
        return; // a slot of the file table has no fd for fcntl(2) and SO_RCVTIMEO

    // net/ipv4/tcp.c tcp_splice_read waits sock_rcvtimeo(sk, file's O_NONBLOCK): up to
    // SO_RCVTIMEO on a blocking socket, then -EAGAIN (tests/integration/
    // splice_park_probe_test.cpp). SO_SNDTIMEO bounds the other direction's splices
    // into this socket, which turn blocking with it.
    if (!set_timeouts(dir.src.index, shard_.config.experimental.bulk_park) ||
        !set_blocking(dir.src.index, true))
        return;
    dir.parked = true;
    ++parked_now_;
    shard_.io.set_parked(parked_now_);
    bump(shard_.io.counters().parks);
    bump(shard_.io.counters().parked);
}

void Directions::unpark(Connection& conn, Side side) {
    Direction& dir = conn.dir(side);
    if (!dir.parked)
        return;
    set_blocking(dir.src.index, false);
    dir.parked = false;
    --parked_now_;
    shard_.io.set_parked(parked_now_);
    drop(shard_.io.counters().parked);
}

void Directions::cancel_parked(Connection& conn) {
    if (!conn.dirs[0].parked && !conn.dirs[1].parked)
        return;
    for (Side side : kBothSides) {
        // Non-blocking again first: a splice that has not started yet (the second half
        // of a pair) then cannot wait either.
        unpark(conn, side);
    }
    for (Side side : kBothSides) {
        Direction& dir = conn.dir(side);
        // A cancel reaches a splice running on a worker: io-wq signals it and the
        // splice ends with -EINTR (§1.6). The half that is not running answers
        // -ENOENT, which is harmless.
        if (dir.state == DirState::Splicing) {
            if (dir.pair_pending == 2)
                shard_.io.cancel(conn.in_flight, conn.tag(Op::SpliceIn, side),
                                 conn.tag(Op::Cancel, side));
            shard_.io.cancel(conn.in_flight, conn.tag(Op::SpliceOut, side),
                             conn.tag(Op::Cancel, side));
        } else if (dir.state == DirState::Draining) {
            shard_.io.cancel(conn.in_flight, conn.tag(Op::Drain, side), conn.tag(Op::Cancel, side));
        }
    }
}

} // namespace uringfwd::engine
