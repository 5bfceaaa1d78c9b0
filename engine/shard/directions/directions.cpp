#include "shard/directions/directions.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

namespace uringfwd::engine {

namespace {

// Both splices of a pair and every drain are non-blocking: the sockets are
// O_NONBLOCK and the pipes too (a TCP source heeds only the socket's flag), and
// SPLICE_F_NONBLOCK as well, which an AF_UNIX source also heeds (docs/kernel.md
// §2.1). None of them can park an io-wq thread.
constexpr unsigned kSpliceFlags = SPLICE_F_NONBLOCK;

constexpr std::chrono::milliseconds kPipeRetryDelay{50};

} // namespace

Outcome Directions::start(Connection& conn, Side side) {
    Direction& dir = conn.dir(side);
    if (dir.pipe)
        return start_with_unsent(conn, side);
    dir.path = shard_.buffers != nullptr ? first_path(shard_.data_path) : Path::Splice;
    dir.inline_splice = shard_.inline_splice;
    if (dir.path == Path::Copy)
        return pump_copy(conn, side);
    start_reading(conn, side);
    return Outcome::running();
}

Outcome Directions::on_completion(Connection& conn, Side side, Op op, const uring::Completion& c) {
    switch (op) {
    case Op::PollIn:
        return on_readable(conn, side, c.result);
    case Op::PollOut:
        return on_writable(conn, side, c.result);
    case Op::SpliceIn:
    case Op::SpliceOut:
        return on_pair_half(conn, side, op, c.result);
    case Op::Drain:
        return on_drained(conn, side, c.result);
    case Op::Recv:
        return on_received(conn, side, c);
    case Op::Send:
        return on_sent(conn, side, c.result);
    case Op::ErrorWatch:
        return on_error_watch(conn, side, c.result, c.more());
    // Not a direction's: Connections::on_completion keeps them.
    case Op::Wake:
    case Op::PipeRetry:
    case Op::PipeRetryCancel:
    case Op::CoalesceTick:
    case Op::DrainDeadline:
    case Op::IdleSweep:
    case Op::LeaveTick:
    case Op::ShardCancel:
    case Op::ShardCloseFile:
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
    return Outcome::failed(CloseReason::LocalError, "an unknown operation on", "connection", 0);
}

Outcome Directions::resume_reading(Connection& conn, Side side) {
    if (conn.dir(side).state == DirState::Copying)
        return pump_copy(conn, side);
    if (conn.dir(side).state == DirState::PollingOut) // its pipe still holds bytes
        return follow(conn, side, Next::WaitWritable, 0, 0);
    start_reading(conn, side);
    return Outcome::running();
}

// ---------------------------------------------------------------- splice path

void Directions::start_reading(Connection& conn, Side side) {
    Direction& dir = conn.dir(side);
    dir.state = DirState::PollingIn;
    dir.held = false;
    // One-shot and level-checked when armed (docs/kernel.md §2.3): if data is already
    // queued it completes at once, inline, without an io-wq thread.
    shard_.io.poll(conn.in_flight, conn.tag(Op::PollIn, side), dir.src, POLLIN);
}

Outcome Directions::on_readable(Connection& conn, Side side, int result) {
    if (conn.phase == Phase::Closing) {
        // POLLIN: bytes (or a FIN: POLLIN alone cannot tell) wait that nobody will read.
        if (result > 0 && (result & POLLIN))
            conn.dir(side).discarded = true;
        return Outcome::running();
    }
    if (result < 0)
        return source_failed(side, "polling", result);
    Direction& dir = conn.dir(side);
    dir.pipe = shard_.pool.lease();
    if (!dir.pipe) {
        dir.state = DirState::WaitingPipe;
        pipe_waiters_.push_back({conn.slot, conn.generation, side});
        bump(shard_.io.counters().pipe_waits);
        return Outcome::running();
    }
    return start_pair(conn, side);
}

Outcome Directions::start_pair(Connection& conn, Side side) {
    Direction& dir = conn.dir(side);
    if (dir.inline_splice) {
        if (inline_fds_ready(conn, side))
            return pump_inline(conn, side);
        if (dir.inline_splice) { // an install is under way; on_fd_installed() goes on
            dir.state = DirState::WaitingFd;
            return Outcome::running();
        }
        // No fd could be had for a slot: this direction splices through the ring.
    }
    submit_pair(conn, side);
    return Outcome::running();
}

void Directions::submit_pair(Connection& conn, Side side) {
    Direction& dir = conn.dir(side);
    dir.state = DirState::Splicing;
    dir.pair_pending = 2;
    // The pipe is empty here, so the second splice moves exactly what the first put
    // in, or stops early when the destination is full.
    shard_.io.splice_pair(conn.in_flight, conn.tag(Op::SpliceIn, side),
                          conn.tag(Op::SpliceOut, side), dir.src, dir.pipe->write_fd(),
                          dir.pipe->read_fd(), dir.dst, static_cast<unsigned>(dir.pipe->capacity()),
                          kSpliceFlags);
}

void Directions::count_bytes(Connection& conn, Side side, int moved) {
    if (moved <= 0)
        return;
    conn.last_active = shard_.now;
    conn.bytes[static_cast<int>(side)] += static_cast<uint64_t>(moved);
    ShardCounters& counters = shard_.io.counters();
    bump(side == Side::ToUpstream ? counters.bytes_to_upstream : counters.bytes_to_client,
         static_cast<uint64_t>(moved));
}

Outcome Directions::on_pair_half(Connection& conn, Side side, Op op, int result) {
    Direction& dir = conn.dir(side);
    ShardCounters& counters = shard_.io.counters();
    (op == Op::SpliceIn ? dir.pair_in : dir.pair_out) = result;
    bump(counters.splices);
    if (result == -EAGAIN)
        bump(counters.eagains);
    if (--dir.pair_pending > 0)
        return Outcome::running();

    // Account first, whatever happens next: the counter decides whether this pipe may
    // ever be reused, so it must be exact even for a connection being torn down.
    if (dir.pair_in > 0)
        dir.pipe->filled(static_cast<std::size_t>(dir.pair_in));
    if (dir.pair_out > 0)
        dir.pipe->drained(static_cast<std::size_t>(dir.pair_out));
    count_bytes(conn, side, dir.pair_out);
    if (dir.pair_in > 0 && !dir.pipe->empty())
        bump(counters.short_splices);

    if (conn.phase == Phase::Closing)
        return Outcome::running();
    Next next = after_pair({dir.pair_in, dir.pair_out, dir.pipe->bytes(), dir.pipe->capacity()});
    return follow(conn, side, next, dir.pair_in, dir.pair_out);
}

Outcome Directions::on_writable(Connection& conn, Side side, int result) {
    if (conn.phase == Phase::Closing)
        return Outcome::running();
    if (result < 0)
        return destination_failed(side, "polling", result);
    Direction& dir = conn.dir(side);
    if (dir.inline_splice)
        return drain_inline(conn, side);
    dir.state = DirState::Draining;
    shard_.io.splice(conn.in_flight, conn.tag(Op::Drain, side),
                     uring::FileRef::plain(dir.pipe->read_fd()), dir.dst,
                     static_cast<unsigned>(dir.pipe->bytes()), kSpliceFlags);
    return Outcome::running();
}

Outcome Directions::on_drained(Connection& conn, Side side, int result) {
    Direction& dir = conn.dir(side);
    bump(shard_.io.counters().splices);
    if (result == -EAGAIN)
        bump(shard_.io.counters().eagains);
    if (result > 0)
        dir.pipe->drained(static_cast<std::size_t>(result));
    count_bytes(conn, side, result);
    if (conn.phase == Phase::Closing)
        return Outcome::running();
    if (dir.unsent_first && dir.pipe->empty())
        return unsent_delivered(conn, side);
    return follow(conn, side, after_drain(result, dir.pipe->bytes()), /*read_result=*/0, result);
}

Outcome Directions::follow(Connection& conn, Side side, Next next, int read_result,
                           int write_result) {
    Direction& dir = conn.dir(side);
    switch (next) {
    case Next::SpliceAgain:
        dir.small_in_a_row = 0; // a bulk read
        if (!conn.leaving) {
            park(conn, side); // if bulk_park is on
            return start_pair(conn, side);
        }
        // Leaving (a hand-over, a move): the pipe is empty now, so wait for the source
        // with nothing held, as a direction that read it dry does; the poll finds the
        // bytes already queued (docs/handover.md).
        [[fallthrough]];
    case Next::WaitReadable: {
        bool small = splice_turns_small(shard_.data_path, parked_size(dir.parked, read_result),
                                        dir.pipe->capacity(), dir.small_in_a_row);
        // Parked, after a read or a drain (read_result 0): the next splice waits in the
        // kernel for the next bytes, no poll. -EAGAIN: it waited bulk_park in vain.
        if (dir.parked && read_result >= 0 && !small && !conn.leaving) {
            submit_pair(conn, side); // a parked direction splices through the ring
            return Outcome::running();
        }
        unpark(conn, side); // idle for bulk_park (the splice timed out), or turning small
        // An idle direction holds no pipe: 10 000 idle connections cost no pipe memory.
        release_pipe(dir, false);
        if (small) {
            // A request or reply: the next one is most likely small too, and copying it
            // saves the io-wq hop. The watch stays: it is harmless while receiving.
            bump(shard_.io.counters().switches_to_copy);
            dir.path = Path::Copy;
            dir.full_in_a_row = 0;
            dir.small_in_a_row = 0;
            return pump_copy(conn, side);
        }
        if (should_hold(conn, side)) {
            hold(conn, side); // leaving: the connection is quiet once the other is
            return Outcome::running();
        }
        unwatch_source(conn, side); // the POLLIN poll reports errors too
        start_reading(conn, side);
        return Outcome::running();
    }
    case Next::WaitWritable:
        watch_source(conn, side);
        dir.state = DirState::PollingOut;
        shard_.io.poll(conn.in_flight, conn.tag(Op::PollOut, side), dir.dst, POLLOUT);
        return Outcome::running();
    case Next::SourceEnded:
        unpark(conn, side);
        release_pipe(dir, false);
        return end_direction(conn, side);
    case Next::SourceFailed:
        return source_failed(side, "reading", read_result);
    case Next::DestFailed:
        return destination_failed(side, "writing", write_result);
    }
    return Outcome::running();
}

Outcome Directions::end_direction(Connection& conn, Side side) {
    // Half-close: pass the FIN on; the other direction keeps flowing. When the other
    // direction has finished already, the connection closes now (Connections::handle),
    // and closing a socket with nothing unsent sends the FIN (net/ipv4/tcp.c
    // __tcp_close -> tcp_send_fin): a shutdown first would only cost a syscall, or on a
    // slot an fd install and its completion, per connection.
    if (conn.dir(other(side)).state != DirState::Done)
        pass_fin_on(conn, side);
    conn.dir(side).state = DirState::Done;
    return Outcome::finished();
}

void Directions::pass_fin_on(Connection& conn, Side side) {
    Direction& dir = conn.dir(side);
    if (!dir.dst.fixed) {
        ::shutdown(dir.dst.index, SHUT_WR);
    } else if (int fd = conn.destination(side).syscall_fd(); fd >= 0) {
        ::shutdown(fd, SHUT_WR); // the fd installed for inline splices
    } else {
        // A slot has no fd for shutdown(2), and IORING_OP_SHUTDOWN always runs on an
        // io-wq worker (io_uring/net.c io_shutdown_prep sets REQ_F_FORCE_ASYNC): a
        // kernel thread per half-close. A plain fd installed for a moment (inline)
        // costs less; Connections::on_half_close() shuts and closes it. The
        // connection is not finalized before that: it counts as in flight.
        shard_.io.install_fd(conn.in_flight, conn.tag(Op::HalfClose, side), dir.dst);
        ++conn.socket_ops;
    }
}

void Directions::watch_source(Connection& conn, Side side) {
    Direction& dir = conn.dir(side);
    if (dir.watching)
        return;
    // Nothing reads this source while the direction waits for its destination or has
    // finished, and the other direction may be idle: nothing would notice a reset of
    // this peer. Watch it for errors. A one-shot poll cannot: the kernel always adds
    // POLLRDHUP, POLLHUP and POLLERR (io_uring/poll.c io_init_poll_iocb), and a source
    // that sent FIN reports POLLRDHUP for good, so it would complete at once. A
    // multishot poll reports that once, then only new wake-ups: the reset's POLLERR.
    shard_.io.poll_multishot(conn.in_flight, conn.tag(Op::ErrorWatch, side), dir.src,
                             POLLERR | POLLHUP);
    dir.watching = true;
}

void Directions::unwatch_source(Connection& conn, Side side) {
    Direction& dir = conn.dir(side);
    if (!dir.watching)
        return;
    shard_.io.cancel(conn.in_flight, conn.tag(Op::ErrorWatch, side), conn.tag(Op::Cancel, side));
    dir.watching = false; // its last completion (-ECANCELED) is still to come
}

Outcome Directions::on_error_watch(Connection& conn, Side side, int result, bool more) {
    // The last completion of a watch that ended by itself. One that unwatch_source()
    // cancelled says nothing of `watching`: unwatch cleared it, and a new watch of the
    // same source may be armed already (a hold, then a read, then a hold again), whose
    // flag this completion must not clear (the new watch would be left untracked, and
    // its connection never idle).
    if (!more && result != -ECANCELED)
        conn.dir(side).watching = false;
    if (conn.phase == Phase::Closing || result < 0)
        return Outcome::running();
    // POLLERR: the watched source was reset (or, for a Unix peer, closed with our
    // bytes unread). Nothing it sent can be trusted to be complete any more and nothing
    // can be delivered to it: reset the other side too. The first completion
    // (POLLRDHUP after a FIN) and POLLHUP (both halves shut, data may still be queued)
    // are no reason to.
    if (result & POLLERR)
        return source_failed(side, "reset while nobody read from it:", 0);
    return Outcome::running();
}

bool Directions::leaves_bytes_behind(const Connection& conn) {
    if (conn.preamble_sent < conn.preamble.size())
        return true; // bytes read before it forwarded, or a PROXY header, not all sent
    for (const Direction& dir : conn.dirs)
        if (dir.discarded || dir.chunk_count != 0 || (dir.pipe && !dir.pipe->empty()))
            return true;
    return false;
}

void Directions::release(Connection& conn, bool verify) {
    for (Side side : kBothSides)
        unpark(conn, side);
    for (Direction& dir : conn.dirs) {
        release_pipe(dir, verify);
        give_back_chunks(dir);
    }
}

void Directions::release_pipe(Direction& dir, bool verify) {
    if (!dir.pipe)
        return;
    shard_.pool.give_back(std::move(*dir.pipe), verify ? pipes::PipePool::Check::AskKernel
                                                       : pipes::PipePool::Check::Counter);
    dir.pipe.reset();
}

void Directions::resume_waiters(ConnectionTable& table, const OutcomeHandler& handle) {
    resume_pipe_waiters(table, handle);
    resume_buffer_waiters(table, handle);
    resume_coalesced(table, handle);
}

void Directions::resume_pipe_waiters(ConnectionTable& table, const OutcomeHandler& handle) {
    while (!pipe_waiters_.empty()) {
        Waiting w = pipe_waiters_.front();
        Connection* conn = table.find(w.slot, w.generation);
        if (conn == nullptr || conn->phase != Phase::Forwarding ||
            conn->dir(w.side).state != DirState::WaitingPipe) {
            pipe_waiters_.pop_front();
            continue;
        }
        std::optional<pipes::Pipe> pipe = shard_.pool.lease();
        if (!pipe)
            break;
        pipe_waiters_.pop_front();
        conn->dir(w.side).pipe = std::move(pipe);
        handle(*conn, w.side, start_pair(*conn, w.side));
    }
    // If no pipe is out, none will come back to wake the waiters: the kernel refused
    // to make one (fd or pipe budget). Try again a little later.
    if (!pipe_waiters_.empty() && shard_.pool.counters().leased_now == 0 && !retry_armed_ &&
        !stopping_) {
        retry_armed_ = true;
        shard_.io.timeout(in_flight_, OpTag::for_shard(Op::PipeRetry), kPipeRetryDelay);
    }
}

void Directions::stop() {
    stopping_ = true;
    if (retry_armed_)
        shard_.io.cancel(in_flight_, OpTag::for_shard(Op::PipeRetry),
                         OpTag::for_shard(Op::PipeRetryCancel));
}

} // namespace uringfwd::engine
