// An upgrade's connection hand-over, the shard's half (docs/handover.md): while the
// engine hands over, every forwarding connection that is quiet — each direction done,
// waiting for its source with nothing held (no pipe, no copy chunk, no send, no
// setsockopt or shutdown in flight), or waiting for its destination with bytes in its
// pipe when that pipe may go along — is paused and detached: its reads (and waits for
// room) are cancelled, plain fds are installed for sockets in slots, and its fds go to
// the sink. Everything it has not forwarded yet is then in the sockets' own queues or in
// the pipes that go with it, so the process that takes the fds goes on exactly where
// this one stopped; nothing has to be copied out of a pipe.
//
// A cancel races with the data: a read that completes before its cancel reaches it
// (its receive got bytes) calls the pause off, and the data path takes that completion
// as usual; the connection is tried again once it is quiet again.
#include "shard/connection/connections.hpp"
#include "shard/inspect/client_addresses.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

namespace uringfwd::engine {

namespace {

// Connections being paused at once, per shard: each costs up to four submissions (two
// reads and two watches cancelled) and two fd installs, so a table of 10 000 idle
// connections moves in batches that never crowd the ring.
constexpr std::size_t kMaxPausing = 512;
// Fds of the connections detached and not yet sent, engine-wide, above which no shard
// pauses more: each holds two plain fds (the ones installed for its slots, on direct
// descriptors) and both ends of any pipe that goes along, which the fd limit did not
// count on; the sender passes 100 connections at a time. 1024 idle connections, fewer
// with pipes.
constexpr std::size_t kMaxQueuedFds = 2048;
// A direction held for a pause reads again once nothing of its connection has moved for
// this long, and none of the connection holds for as long (Connection::holding_since):
// the other direction's destination may be a peer that reads only once it has written
// what it is writing, which the hold keeps it from.
constexpr std::chrono::milliseconds kHoldLimit{1000};
// A pause called off for want of a pipe (hold_chunks_in_pipe) is tried again after this.
constexpr std::chrono::milliseconds kPauseRetry{100};
// A pause called off for want of an fd for a slot (EMFILE) is tried again after this:
// the sender passes a batch and closes its fds in well under it.
constexpr std::chrono::milliseconds kNoFdRetry{1000};

} // namespace

void Connections::set_handover(DetachedQueue* queue, UnsentBytes unsent) {
    detached_ = queue;
    handover_takes_pipes_ = queue != nullptr && unsent == UnsentBytes::GoAlong;
    if (detached_ != nullptr)
        return;
    // Called off (the successor went away): whoever is pausing reads again, but one
    // that is moving to another shard goes on with its move.
    table_.for_each_active([this](Connection& conn) {
        if (conn.move_to >= 0)
            return;
        conn.leaving = false;
        if (conn.phase != Phase::Forwarding)
            return;
        if (conn.pausing()) {
            call_off_pause(conn);
        } else {
            resume_held(conn);
            settle(conn);
        }
    });
}

void Connections::call_off_pause(Connection& conn) {
    --pausing_;
    conn.handover = HandoverStep::None;
    resume_paused(conn);
    settle(conn);
}

void Connections::pause_leaving_connections() {
    if (detached_ != nullptr) {
        // With the queue full no more pause (the next batch taken wakes every shard:
        // after_batch() looks again), but a hold still lets go in time.
        const bool room = detached_->fds() < kMaxQueuedFds;
        table_.for_each_active([this, room](Connection& conn) {
            if (room)
                pause_if_quiet(conn);
            else
                let_go_of_a_long_hold(conn);
        });
    }
    if (moves_.empty())
        return;
    std::vector<PendingMove> pending;
    pending.swap(moves_);
    for (const PendingMove& move : pending) {
        Connection* conn = table_.find(move.slot, move.generation);
        if (conn == nullptr || conn->phase == Phase::Closing || conn->move_to < 0)
            continue; // closed meanwhile, or moved
        if (conn->handover == HandoverStep::None &&
            (moves_off_ || shard_.now >= conn->move_deadline)) {
            // Never quiet in time (its destination never reads), or the engine stops:
            // it stays, and its directions read as before.
            shard_.log.debug("connection {}: not moved to shard {}: {}", conn->record.id,
                             conn->move_to, moves_off_ ? "the engine stops" : "never quiet");
            conn->move_to = -1;
            conn->leaving = detached_ != nullptr;
            bump(shard_.io.counters().moves_given_up);
            resume_held(*conn);
            settle(*conn);
            continue;
        }
        pause_if_quiet(*conn);
        moves_.push_back(move); // until it has gone: a pause called off tries again
    }
}

void Connections::pause_if_quiet(Connection& conn) {
    if (conn.phase != Phase::Forwarding || conn.handover != HandoverStep::None)
        return;
    conn.leaving = true;
    if (pausing_ < kMaxPausing && shard_.now >= conn.pause_again_at && quiet(conn)) {
        pause(conn);
        return;
    }
    let_go_of_a_long_hold(conn);
}

void Connections::let_go_of_a_long_hold(Connection& conn) {
    // A hold waits for the other direction to deliver what it holds: let go of it only
    // once nothing has moved for kHoldLimit (a slow reader is still a reader).
    if (conn.phase == Phase::Forwarding && conn.handover == HandoverStep::None &&
        conn.holding_since != std::chrono::steady_clock::time_point{} &&
        shard_.now - std::max(conn.holding_since, conn.last_active) >= kHoldLimit) {
        // Set first: a copy direction let go decides at once whether to hold again.
        conn.hold_again_at = shard_.now + kHoldLimit;
        resume_held(conn); // the other direction did not get quiet: let this one flow
        settle(conn);
    }
}

bool Connections::quiet(const Connection& conn) const {
    // A pipe goes along to another shard of this engine always; to another process only
    // when whoever passes the connection on passes its pipes too.
    const std::size_t pipe_room =
        conn.move_to >= 0 || handover_takes_pipes_ ? shard_.pool.pipe_size() : 0;
    return conn.phase == Phase::Forwarding && conn.handover == HandoverStep::None &&
           conn.socket_ops == 0 && conn.preamble_sent >= conn.preamble.size() &&
           Directions::quiet(conn, Side::ToUpstream, pipe_room) &&
           Directions::quiet(conn, Side::ToClient, pipe_room);
}

void Connections::pause(Connection& conn) {
    conn.handover = HandoverStep::Pausing;
    conn.holding_since = {};
    ++pausing_;
    for (Side side : kBothSides) {
        directions_.unwatch_source(conn, side); // its -ECANCELED is the data path's as usual
        const Direction& dir = conn.dir(side);
        if (dir.held) {
            conn.paused[static_cast<int>(side)] = true; // no receive to cancel
            continue;
        }
        // A direction waiting for its destination with bytes in its pipe, or with copy
        // chunks (quiet only when a pipe may go along), has its POLLOUT poll or its send
        // cancelled instead.
        Op read = dir.state == DirState::PollingIn    ? Op::PollIn
                  : dir.state == DirState::PollingOut ? Op::PollOut
                  : dir.state == DirState::Copying    ? (dir.sending ? Op::Send : Op::Recv)
                                                      : Op::Count;
        if (read == Op::Count)
            continue; // done
        conn.cancelling[static_cast<int>(side)] = true;
        shard_.io.cancel(conn.in_flight, conn.tag(read, side), conn.tag(Op::Cancel, side));
    }
    advance_handover(conn); // both done already: nothing to wait for
}

bool Connections::on_handover_completion(Connection& conn, const OpTag& t,
                                         const uring::Completion& c) {
    const int side = static_cast<int>(t.side);
    if (t.op == Op::InstallFd && conn.handover == HandoverStep::Installing) {
        --conn.socket_ops;
        if (c.result >= 0)
            conn.source(t.side).set_installed(c.result);
        return true; // one that failed leaves the slot without an fd: advance_handover()
    }
    const bool poll = t.op == Op::PollIn || t.op == Op::PollOut;
    if ((!poll && t.op != Op::Recv && t.op != Op::Send) || !conn.cancelling[side])
        return false;
    // A request the cancel reached ends with -ECANCELED, or with -EINTR when it was
    // running on an io-wq worker, which the cancel interrupts (io_uring/io-wq.c
    // io_wq_worker_cancel signals the worker): nothing moved. Found as a copy
    // direction's cancelled send, which ended with -EINTR and reset the connection.
    const bool cancelled = c.result == -ECANCELED || c.result == -EINTR;
    if (t.op == Op::Send && c.result < 0 && !cancelled && c.result != -EAGAIN) {
        // The destination failed: the data path closes the connection as it would have.
        conn.cancelling[side] = false;
        if (conn.handover == HandoverStep::Pausing) {
            --pausing_;
            conn.handover = HandoverStep::None;
            resume_paused(conn);
        }
        return false;
    }
    conn.cancelling[side] = false;
    if (t.op == Op::Send) {
        // What it sent before the cancel reached it is delivered: counted, its chunks
        // retired; the rest waits to go along in a pipe (advance_handover).
        directions_.on_send_cancelled(conn, t.side, c.result);
        conn.paused[side] = true;
        if (conn.handover != HandoverStep::Pausing)
            resume_paused(conn);
        return true;
    }
    // A poll that fired before its cancel reached it moved nothing: the bytes (or the
    // FIN, or the error) it saw wait in the socket for whoever reads it next, and the
    // room it saw for whoever writes next, so the direction is as quiet as a cancelled
    // one. A receive that came back with bytes is not: they are in a buffer of this
    // process now.
    const bool moved = !cancelled && !(poll && c.result >= 0);
    if (moved) {
        // It moved before the cancel reached it: not quiet after all.
        if (conn.handover == HandoverStep::Pausing) {
            --pausing_;
            conn.handover = HandoverStep::None;
            resume_paused(conn);
        }
        return false;
    }

    if (t.op == Op::Recv)
        conn.dir(t.side).receiving = false;
    conn.paused[side] = true;
    if (conn.handover != HandoverStep::Pausing)
        resume_paused(conn); // called off while this cancel was on its way
    return true;
}

void Connections::resume_paused(Connection& conn) {
    for (Side side : kBothSides) {
        bool& paused = conn.paused[static_cast<int>(side)];
        if (!paused)
            continue;
        paused = false;
        if (conn.phase == Phase::Forwarding)
            handle(conn, side, directions_.resume_reading(conn, side));
    }
}

void Connections::resume_held(Connection& conn) {
    conn.holding_since = {};
    for (Side side : kBothSides)
        if (conn.phase == Phase::Forwarding)
            handle(conn, side, directions_.release_hold(conn, side));
}

void Connections::advance_handover(Connection& conn) {
    if (!conn.pausing() || conn.phase != Phase::Forwarding || !conn.in_flight.idle())
        return;
    if (conn.move_to < 0 && detached_ == nullptr) {
        // Nowhere to go any more (a move given up as the engine stops): it stays.
        conn.leaving = false;
        --pausing_;
        conn.handover = HandoverStep::None;
        resume_paused(conn);
        return;
    }
    if (conn.handover == HandoverStep::Pausing) {
        if (!directions_.hold_chunks_in_pipes(conn)) {
            // No pipe to be had, or a small one: served on here, and tried again.
            shard_.log.debug("connection {}: no pipe for its unsent bytes; not moved yet",
                             conn.record.id);
            call_off_for_now(conn, kPauseRetry);
            return;
        }
        // A slot is no fd: the ring installs one for it (IORING_OP_FIXED_FD_INSTALL,
        // docs/kernel.md §11), which SCM_RIGHTS can pass.
        conn.handover = HandoverStep::Installing;
        bool installing = false;
        for (Side side : kBothSides) {
            ConnSocket& socket = conn.source(side); // the client, then the upstream
            if (socket.fixed() && socket.syscall_fd() < 0) {
                shard_.io.install_fd(conn.in_flight, conn.tag(Op::InstallFd, side), socket.ref());
                ++conn.socket_ops;
                installing = true;
            }
        }
        if (installing)
            return;
    }
    for (const ConnSocket* socket : {&conn.client, &conn.upstream}) {
        if (socket->fixed() && socket->syscall_fd() < 0) {
            // No fd to be had (EMFILE: the file table is full, often of connections
            // queued for the sender): served on here, and tried again once the queue
            // has had time to drain. An fd installed for the other slot is kept.
            shard_.log.debug("connection {}: no fd for its slot; not handed over yet", conn.slot);
            call_off_for_now(conn, kNoFdRetry);
            return;
        }
    }
    detach(conn);
}

void Connections::call_off_for_now(Connection& conn, std::chrono::milliseconds retry) {
    conn.pause_again_at = shard_.now + retry;
    --pausing_;
    conn.handover = HandoverStep::None;
    resume_paused(conn); // still leaving: paused again after `retry`
}

void Connections::resume(Connection& conn, Resumed& from) {
    // Taken back from a successor that refused it: this engine keeps it to its end. One
    // moved in from another shard of this engine during a hand-over is still handable.
    if (detached_ != nullptr && !from.moved)
        conn.handover = HandoverStep::Unmovable;
    for (Side side : kBothSides) {
        // Bytes read there and not delivered: its direction delivers them first
        // (Directions::start), and the pipe is this shard's to give back after.
        std::optional<pipes::Pipe>& unsent = from.unsent[static_cast<int>(side)];
        if (!unsent)
            continue;
        shard_.pool.adopt();
        conn.dir(side).pipe = std::move(unsent);
        unsent.reset();
    }
    conn.record.opened_at = from.opened_at;
    conn.record.connected_at = from.connected_at; // start_forwarding() keeps it
    conn.bytes[static_cast<int>(Side::ToUpstream)] = from.bytes[static_cast<int>(Side::ToUpstream)];
    conn.bytes[static_cast<int>(Side::ToClient)] = from.bytes[static_cast<int>(Side::ToClient)];
    if (from.moved) {
        // From another shard of this engine: the same connection, still.
        const Resumed::SameEngine& same = *from.moved;
        conn.record.id = same.id;
        conn.record.observed = same.observed;
        conn.record.endpoints_filled = same.endpoints_filled;
        conn.record.client_address = same.client_address;
        conn.record.local_address = same.local_address;
        conn.record.upstream_address = same.upstream_address;
        conn.has_addresses = same.has_addresses;
        conn.client_sa = same.client_sa;
        conn.local_sa = same.local_sa;
        if (same.sources) {
            if (conn.route->table->sources == same.sources) {
                conn.source_hold = same.source_hold; // counted on, by this connection
            } else {
                SourceTable::Hold hold = same.source_hold; // a table of its own here
                same.sources->release(hold);
            }
        }
    }
    ShardRoute& r = *conn.route;
    for (std::size_t m = 0; m < r.route.members.size(); ++m) {
        if (r.route.members[m].name != from.member)
            continue;
        // Counted among its connections again (least-active, max_connections); a member
        // full here still gets it, uncounted: it is an open connection, not a new one.
        conn.attempt.member = static_cast<int>(m);
        conn.attempt.member_taken = r.pool.opened(m);
        return;
    }
}

void Connections::move_into_slots(Connection& conn) {
    // What a slot has no fd to ask for (getpeername(2), getsockname(2)), asked while
    // there is one: the client's addresses (control socket, logs), the upstream's.
    if (std::optional<SocketAddress> peer = socket_peer_of(conn)) {
        conn.socket_addresses_known = true;
        conn.socket_peer = *peer;
        conn.socket_local = socket_local_of(conn);
    }
    conn.record.upstream_address = upstream_endpoint(conn);
    conn.moving_into_slots[0] = conn.client.fd();
    conn.moving_into_slots[1] = conn.upstream.fd();
    ++conn.socket_ops; // runs inline and always completes: nothing to cancel
    shard_.io.move_into_slots(conn.in_flight, conn.tag(Op::MoveIntoSlots), conn.moving_into_slots,
                              2);
}

void Connections::on_moved_into_slots(Connection& conn, int result) {
    // The first `result` fds are in slots now (their number written over them): each
    // socket takes its slot and closes its plain fd. A closing connection does too, so
    // that finalize() closes the slots.
    ConnSocket* sockets[2] = {&conn.client, &conn.upstream};
    const int moved = result > 0 ? result : 0;
    for (int i = 0; i < moved && i < 2; ++i) {
        sockets[i]->set_slot(conn.moving_into_slots[i]);
        bump(shard_.io.counters().direct_slots); // dropped as the slot closes
    }
    if (moved < 2 && conn.phase != Phase::Closing)
        shard_.log.warn("an adopted connection stays on {} plain fd(s): no slot for it in the "
                        "file table ({})",
                        2 - moved, result < 0 ? std::strerror(-result) : "table full");
    if (conn.phase == Phase::Closing)
        return; // closed while it moved (the engine stops): settle() finishes it
    start_forwarding(conn);
}

void Connections::detach(Connection& conn) {
    --pausing_;
    conn.handover = HandoverStep::None;
    conn.paused[0] = conn.paused[1] = false;
    std::optional<Resumed::SameEngine> same;
    const bool holds_pipe = conn.dir(Side::ToUpstream).pipe || conn.dir(Side::ToClient).pipe;
    if (conn.move_to >= 0 && detached_ != nullptr && (handover_takes_pipes_ || !holds_pipe)) {
        // A hand-over began while it waited to move: it goes to the successor, with
        // the rest (the other shard would only have to hand it over in turn). One with
        // a pipe the successor cannot take moves to the shard as asked.
        conn.move_to = -1;
    }
    if (conn.move_to >= 0) {
        // To another shard of this engine: the same connection to the application,
        // which hears nothing of the move (finalize() neither reports nor counts it).
        // Its addresses are read while its sockets still have their fds here.
        fill_endpoints(conn);
        same = Resumed::SameEngine{
            .id = conn.record.id,
            .observed = conn.record.observed,
            .endpoints_filled = conn.record.endpoints_filled,
            .client_address = conn.record.client_address,
            .local_address = conn.record.local_address,
            .upstream_address = upstream_endpoint(conn),
            .has_addresses = conn.has_addresses,
            .client_sa = conn.client_sa,
            .local_sa = conn.local_sa,
            .route_limit = conn.route_counted ? conn.route->route.limit : nullptr,
            .sources = conn.source_hold.held() ? conn.route->table->sources : nullptr,
            .source_hold = conn.source_hold};
    }
    DetachedConnection out(conn.client.take_fd(), conn.upstream.take_fd());
    out.route = conn.route->route.name;
    if (conn.attempt.member >= 0)
        out.member = conn.route->route.members[static_cast<std::size_t>(conn.attempt.member)].name;
    out.bytes_to_upstream = conn.bytes[static_cast<int>(Side::ToUpstream)];
    out.bytes_to_client = conn.bytes[static_cast<int>(Side::ToClient)];
    out.opened_at = conn.record.opened_at;
    out.connected_at = conn.record.connected_at;
    for (Side side : kBothSides) {
        // What it read and its destination has not taken yet goes with it, in its pipe,
        // which leaves this shard's pool (docs/handover.md).
        Direction& dir = conn.dir(side);
        if (!dir.pipe)
            continue;
        const std::size_t bytes = dir.pipe->bytes();
        const pipes::Pipe::Ends ends = shard_.pool.let_go(std::move(*dir.pipe)).release();
        dir.pipe.reset();
        out.hold_unsent(side == Side::ToUpstream ? Toward::Upstream : Toward::Client,
                        {ends.read_fd, ends.write_fd, bytes});
    }
    if (same)
        moved_(std::move(out), std::move(*same), conn.move_to);
    else
        detached_->push(std::move(out));
    // Its slots (if any) close through the ring; the sockets live on in the fds given
    // away. Counted as closed_handed_over (a move: as moved_out), and the observer
    // hears of it with that reason (the access log leaves it to the engine that
    // carries it on; a move: nothing).
    close(conn, CloseReason::HandedOver);
}

} // namespace uringfwd::engine
