// The inline splice mechanism (SpliceMechanism::Inline, docs/kernel.md §1.9): the ring
// says when a direction's source is readable (a one-shot poll, as for the ring's
// pairs), then the shard's own thread moves the bytes with non-blocking splice(2),
// source -> pipe -> destination, round after round, until the source is empty, the
// destination full or the budget of one wake-up spent. An IORING_OP_SPLICE always runs
// on an io-wq worker (io_uring/splice.c __io_splice_prep sets REQ_F_FORCE_ASYNC, §1.1),
// a hop of 10-15 us per pair (§1.7); here a pipe-full costs two syscalls and no other
// thread is woken. Everything else stays as it is: the pipe is leased from the shard's
// pool and given back only when empty, each round starts on an empty pipe (§2.4), a
// short write waits for POLLOUT with the rest in the pipe, FIN and errors end the
// direction exactly as on the ring.
#include "shard/directions/directions.hpp"

#include <fcntl.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>

namespace uringfwd::engine {

namespace {

// The shard never waits in a splice: every socket of a connection is O_NONBLOCK (a TCP
// source heeds nothing else, §2.1; the accept, socket and hand-over paths all set it),
// the pool's pipes are O_NONBLOCK, and SPLICE_F_NONBLOCK covers a Unix source and the
// pipe either way.
constexpr unsigned kInlineFlags = SPLICE_F_NONBLOCK;

// Pipe-fulls one wake-up may move before the direction yields to the shard's other
// connections: it arms its poll again, which completes at once when more is queued
// (§2.3), so a stream in full flow loses one completion per this many rounds, and no
// connection can keep the shard from the others. On loopback a round moves up to the
// pipe's 1 MiB (§4.1).
constexpr unsigned kInlineRounds = 16;

// See should_coalesce().
constexpr uint64_t kCoalesceLeast = 16 * 1024;

int splice_now(int from, int to, std::size_t len) {
    ssize_t n = ::splice(from, nullptr, to, nullptr, len, kInlineFlags);
    return n >= 0 ? static_cast<int>(n) : -errno;
}

} // namespace

bool Directions::inline_fds_ready(Connection& conn, Side side) {
    bool ready = true;
    for (Side whose : {side, other(side)}) {
        // `whose` names the direction whose source the socket is: this direction's
        // source, then its destination (the other direction's source).
        ConnSocket& socket = conn.source(whose);
        if (socket.syscall_fd() >= 0)
            continue;
        ready = false;
        if (!socket.fixed() || socket.install_failed) {
            // No fd to be had (the process is out of them): splice through the ring,
            // which takes slots.
            conn.dir(side).inline_splice = false;
            return false;
        }
        if (socket.installing)
            continue;
        // Inline (io_uring/openclose.c io_install_fixed_fd: receive_fd() at submission):
        // the completion is in the next batch. One fd per socket for the connection's
        // lifetime, shared by both directions: an idle connection that never went bulk
        // holds none (docs/kernel.md §11).
        socket.installing = true;
        shard_.io.install_fd(conn.in_flight, conn.tag(Op::InstallFd, whose), socket.ref());
        ++conn.socket_ops;
        bump(shard_.io.counters().fd_installs);
    }
    return ready;
}

void Directions::on_fd_installed(Connection& conn, Side side, int result,
                                 const std::function<void(Side, const Outcome&)>& handle) {
    ConnSocket& socket = conn.source(side);
    socket.installing = false;
    if (result >= 0)
        socket.set_installed(result); // closed with the socket, even if closing now
    else
        socket.install_failed = true; // EMFILE: the waiting directions go to the ring
    for (Side s : kBothSides) {
        if (conn.phase == Phase::Closing)
            return;
        if (conn.dir(s).state == DirState::WaitingFd)
            handle(s, start_pair(conn, s));
    }
}

Outcome Directions::pump_inline(Connection& conn, Side side) {
    Direction& dir = conn.dir(side);
    dir.state = DirState::Splicing;
    pipes::Pipe& pipe = *dir.pipe;
    const int src = conn.source(side).syscall_fd();
    const int dst = conn.destination(side).syscall_fd();
    ShardCounters& counters = shard_.io.counters();
    uint64_t moved = 0; // this wake-up
    for (unsigned round = 1;; ++round) {
        // The pipe is empty here: with len = its capacity the first splice takes what
        // the source has, up to the pipe's free slots, and the second moves exactly
        // that or stops where the destination is full (§2.4, §3, §4).
        int in = splice_now(src, pipe.write_fd(), pipe.capacity());
        int out = 0;
        bump(counters.splices);
        bump(counters.inline_splices);
        if (in == -EAGAIN)
            bump(counters.eagains);
        if (in > 0) {
            pipe.filled(static_cast<std::size_t>(in));
            out = splice_now(pipe.read_fd(), dst, pipe.bytes());
            bump(counters.splices);
            bump(counters.inline_splices);
            if (out == -EAGAIN)
                bump(counters.eagains);
            if (out > 0) {
                pipe.drained(static_cast<std::size_t>(out));
                moved += static_cast<uint64_t>(out);
            }
            count_bytes(conn, side, out);
            if (!pipe.empty())
                bump(counters.short_splices);
        }
        Next next = after_pair({in, out, pipe.bytes(), pipe.capacity()});
        if (next != Next::SpliceAgain)
            dir.wake_bytes_avg = static_cast<uint32_t>(
                dir.wake_bytes_avg + (static_cast<int64_t>(std::min<uint64_t>(moved, 1u << 30)) -
                                      static_cast<int64_t>(dir.wake_bytes_avg)) /
                                         4);
        if (next == Next::WaitReadable && !conn.leaving && should_coalesce(dir, moved)) {
            coalesce(conn, side);
            return Outcome::running();
        }
        if (next != Next::SpliceAgain)
            return follow(conn, side, next, in, out);
        dir.small_in_a_row = 0; // a bulk read
        if (round == kInlineRounds || conn.leaving) {
            // Budget spent with the stream still flowing: wait for readiness again,
            // which is there already, behind the completions of everyone else.
            bump(counters.inline_yields);
            return follow(conn, side, Next::WaitReadable, in, out);
        }
    }
}

Outcome Directions::drain_inline(Connection& conn, Side side) {
    Direction& dir = conn.dir(side);
    pipes::Pipe& pipe = *dir.pipe;
    int out = splice_now(pipe.read_fd(), conn.destination(side).syscall_fd(), pipe.bytes());
    ShardCounters& counters = shard_.io.counters();
    bump(counters.splices);
    bump(counters.inline_splices);
    if (out == -EAGAIN)
        bump(counters.eagains);
    if (out > 0)
        pipe.drained(static_cast<std::size_t>(out));
    count_bytes(conn, side, out);
    Next next = after_drain(out, pipe.bytes());
    if (next == Next::WaitReadable && !conn.leaving) {
        // Delivered. Nothing read the source while the destination was full, so it
        // most likely has more: splice on at once (an empty source answers EAGAIN, a
        // syscall, and the direction then waits for POLLIN as usual). The error watch
        // armed meanwhile stays until the direction waits for its source again.
        dir.state = DirState::Splicing;
        return pump_inline(conn, side);
    }
    return follow(conn, side, next, /*read_result=*/0, out);
}

// Coalescing (EngineConfig::Splice::bulk_coalesce). A shard that is quicker than its bulk
// streams wakes for every few segments: each wake-up then moves little and costs as
// much, and the proxy's CPU per GB doubles (docs/bulk-experiments.md, issue 19: the
// same 8 streams at 150 KB or 600 KB per splice, at 0.13 or 0.05 CPU s/GB). A
// direction whose wake-ups move bulk on average (at least min(64 KiB, half a pipe)),
// and whose latest moved less than half a pipe, waits for the shard's next tick
// instead, holding no pipe; the tick serves every such direction at once. A wake-up
// that moved less than kCoalesceLeast is a message, not a stream (a request after a
// download on a kept-alive connection): it is never held, and counts towards the
// direction's switch to copying as usual.
bool Directions::should_coalesce(const Direction& dir, uint64_t moved) const {
    const std::size_t capacity = dir.pipe->capacity();
    return shard_.config.splice.bulk_coalesce.count() > 0 && !stopping_ &&
           moved >= kCoalesceLeast && moved < capacity / 2 &&
           dir.wake_bytes_avg >= bulk_threshold(capacity);
}

void Directions::coalesce(Connection& conn, Side side) {
    Direction& dir = conn.dir(side);
    release_pipe(dir, false); // empty: the source was
    unwatch_source(conn, side);
    dir.state = DirState::Coalescing;
    coalescing_.push_back({conn.slot, conn.generation, side});
    bump(shard_.io.counters().coalesced);
    if (!tick_armed_) {
        tick_armed_ = true;
        shard_.io.timeout(in_flight_, OpTag::for_shard(Op::CoalesceTick),
                          shard_.config.splice.bulk_coalesce);
    }
}

void Directions::resume_coalesced(ConnectionTable& table, const OutcomeHandler& handle) {
    if (!tick_due_)
        return;
    tick_due_ = false;
    std::vector<Waiting> due;
    due.swap(coalescing_);
    for (const Waiting& w : due) {
        Connection* conn = table.find(w.slot, w.generation);
        if (conn == nullptr || conn->phase != Phase::Forwarding ||
            conn->dir(w.side).state != DirState::Coalescing)
            continue;
        // As if the poll had reported it readable: a pipe, then the splices.
        handle(*conn, w.side, on_readable(*conn, w.side, POLLIN));
    }
}

} // namespace uringfwd::engine
