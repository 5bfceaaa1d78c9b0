#include "shard/connection/connections.hpp"
#include "shard/connection/connection_deadlines.hpp"

#include "net/sockets.hpp"
#include "routing/hash.hpp"
#include "shard/connection/direct_sockets.hpp"
#include "shard/inspect/client_addresses.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace uringfwd::engine {

Endpoint Connections::upstream_endpoint(const Connection& conn) {
    if (conn.attempt.member >= 0)
        return to_endpoint(
            conn.route->route.members[static_cast<std::size_t>(conn.attempt.member)].address);
    if (conn.attempt.has_chosen)
        return to_endpoint(conn.attempt.chosen);
    // A pair handed over connected (forward_pair, adopt): its peer. One moved into
    // slots had it asked while it had an fd (move_into_slots).
    if (conn.upstream.fixed())
        return conn.record.upstream_address;
    return peer_endpoint(conn.upstream.fd());
}

int Connections::open(ShardRoute& r, WaitingClient&& client) {
    Connection& conn = table_.allocate();
    client.client.serve_into(conn.client);
    if (conn.client.fixed()) {
        conn.socket_addresses_known = true;
        conn.socket_peer = client.peer;
        conn.socket_local = client.local;
    }
    conn.route = &r;
    conn.route_counted = client.route_counted;
    conn.units = client.units;
    conn.record.opened_at = conn.last_active = shard_.now;
    conn.record.id =
        static_cast<uint64_t>(shard_.shard_index) << 48 | (++opened_ & 0xffffffffffffu);
    conn.preamble = std::move(client.preamble);
    ++r.active;
    ShardCounters& counters = shard_.io.counters();
    // One moved here from another shard was accepted there (and counted there).
    if (client.resumed && client.resumed->moved) {
        bump(counters.moved_in);
    } else {
        ++r.accepted;
        bump(counters.accepted);
    }
    bump(counters.active);
    if (client.set_no_delay)
        no_delay(shard_.io, conn, conn.client);
    set_client_controls(conn);
    if (client.upstream.valid()) { // connected by the caller: forward at once
        if (client.resumed)
            resume(conn, *client.resumed); // one moved between shards was observed already
        notify_open(conn);
        client.upstream.serve_into(conn.upstream);
        conn.caller_upstream = true;
        if (client.resumed) {
            if (shard_.direct && !conn.client.fixed() && !conn.upstream.fixed()) {
                move_into_slots(conn); // forwards once they are in
                return 0;
            }
        }
        start_forwarding(conn);
        return 0;
    }
    if (client.inspect && (!r.inspectors.empty() || client.listener_inspector)) {
        conn.inspect = std::make_unique<InspectState>();
        conn.inspect->listener_inspector = std::move(client.listener_inspector);
        return inspection_.begin_inspect(conn);
    }
    return choose_upstream(conn);
}

int Connections::choose_upstream(Connection& conn) {
    ShardRoute& r = *conn.route;
    conn.phase = Phase::Connecting;
    if (const std::optional<CloseReason> refused = gate_.admit(conn)) {
        close(conn, *refused); // reset before any upstream work
        return 0;
    }
    if (r.route.selector)
        fill_endpoints(conn);
    notify_open(conn);
    if (r.hashes_client()) {
        std::optional<SocketAddress> peer =
            conn.has_addresses ? std::optional(conn.client_sa) : socket_peer_of(conn);
        conn.attempt.client_hash = peer ? hash_client_address(peer->storage) : 0;
    }
    conn.attempt.connect_deadline = shard_.now + r.connect_deadline();
    if (r.route.selector)
        return connector_.follow_selection(conn, r.route.selector(info_of(conn)));
    return connector_.connect_next(conn);
}

void Connections::on_completion(const OpTag& t, const uring::Completion& c) {
    Connection* found = table_.find(t.index, t.generation);
    if (found == nullptr) {
        shard_.log.error("completion for a connection that no longer exists (op {})",
                         static_cast<int>(t.op));
        return;
    }
    Connection& conn = *found;
    shard_.io.completed(conn.in_flight, t, c);
    if (conn.phase == Phase::Forwarding &&
        (conn.pausing() || conn.cancelling[0] || conn.cancelling[1]) &&
        on_handover_completion(conn, t, c)) {
        advance_handover(conn);
        settle(conn);
        return;
    }
    switch (t.op) {
    case Op::Connect:
        connector_.on_connected(conn, c.result);
        break;
    case Op::ConnectTimeout:
    case Op::Cancel:
        break;
    case Op::Socket:
        connector_.on_socket(conn, c.result);
        break;
    case Op::SocketOpt:
        --conn.socket_ops;
        break;
    case Op::MoveIntoSlots:
        --conn.socket_ops;
        on_moved_into_slots(conn, c.result);
        break;
    case Op::SocketControl:
        --conn.socket_ops;
        if (c.result < 0)
            socket_control_failed(conn, t.side,
                                  "a socket control (keepalive, user timeout, "
                                  "mark or tos)",
                                  -c.result);
        break;
    case Op::CloseFile:
        --conn.socket_ops;
        break;
    case Op::HalfClose:
        --conn.socket_ops;
        on_half_close(conn, t.side, c.result);
        break;
    case Op::InstallFd:
        --conn.socket_ops;
        directions_.on_fd_installed(conn, t.side, c.result,
                                    [&](Side side, const Outcome& o) { handle(conn, side, o); });
        break;
    case Op::Preamble:
        on_preamble_sent(conn, c.result);
        break;
    case Op::InspectRecv:
        inspection_.on_inspect_read(conn, c.result);
        break;
    case Op::InspectTimeout:
        break;
    case Op::MemberWait:
        connector_.on_member_wait_over(conn, c.result);
        break;
    case Op::PollIn:
    case Op::PollOut:
    case Op::SpliceIn:
    case Op::SpliceOut:
    case Op::Drain:
    case Op::Recv:
    case Op::Send:
    case Op::ErrorWatch:
        handle(conn, t.side, directions_.on_completion(conn, t.side, t.op, c));
        break;
    // The shard's or a listener's operation: never tagged for a connection.
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
    case Op::Count:
        shard_.log.error("completion with operation {}, which is not a connection's",
                         static_cast<int>(t.op));
        handle(
            conn, t.side,
            Outcome::failed(CloseReason::LocalError, "an unknown operation on", "connection", 0));
        break;
    }
    advance_handover(conn); // a pause waits for this operation of its to come back
    settle(conn);
}

void Connections::start_forwarding(Connection& conn) {
    conn.phase = Phase::Forwarding;
    conn.last_active = shard_.now;
    // An adopted connection keeps the one it had in the engine it came from (resume()).
    if (conn.record.connected_at == std::chrono::steady_clock::time_point{})
        conn.record.connected_at = shard_.now;
    if (shard_.config.observer)
        conn.record.upstream_address = upstream_endpoint(conn);
    conn.dir(Side::ToUpstream).src = conn.client.ref();
    conn.dir(Side::ToUpstream).dst = conn.upstream.ref();
    conn.dir(Side::ToClient).src = conn.upstream.ref();
    conn.dir(Side::ToClient).dst = conn.client.ref();
    add_proxy_header(conn);
    if (!conn.preamble.empty()) {
        // What the client sent before the hand-over goes first; the client's next
        // bytes wait in its socket until then, so nothing is reordered.
        send_preamble(conn);
        handle(conn, Side::ToClient, directions_.start(conn, Side::ToClient));
        return;
    }
    for (Side side : kBothSides)
        handle(conn, side, directions_.start(conn, side));
}

void Connections::handle(Connection& conn, Side side, const Outcome& outcome) {
    switch (outcome.kind) {
    case Outcome::Kind::Running:
        return;
    case Outcome::Kind::Finished:
        if (conn.both_done())
            close(conn, CloseReason::Clean); // FIN both ways
        else
            directions_.watch_source(conn, side);
        return;
    case Outcome::Kind::Failed:
        if (conn.phase != Phase::Closing)
            conn.record.close_error = outcome.error;
        if (conn.phase != Phase::Closing)
            shard_.log.debug("connection {}: closing with reset ({}): {} {}{}{}", conn.slot,
                             to_string(outcome.reason), outcome.action, outcome.peer,
                             outcome.error < 0 ? ": " : "",
                             outcome.error < 0 ? errno_text(outcome.error) : std::string());
        close(conn, outcome.reason);
        return;
    }
}

void Connections::close(Connection& conn, CloseReason reason) {
    if (conn.phase == Phase::Closing)
        return;
    if (conn.pausing()) {
        --pausing_; // reset while it was being paused (a watch saw it)
        conn.handover = HandoverStep::None;
    }
    conn.phase = Phase::Closing;
    conn.close_reason = reason;
    connector_.stop_waiting_member(conn); // cancels its timer
    unsigned watches = (conn.dirs[0].watching ? 1u : 0u) + (conn.dirs[1].watching ? 1u : 0u);
    // Operations that complete on their own (a setsockopt, a shutdown, a slot's close)
    // need no cancel.
    unsigned settled = watches + conn.socket_ops;
    if (!conn.in_flight.idle() && conn.in_flight.ops == settled) {
        // The usual clean end: only error watches are left. Cancel them by tag, which
        // io_uring finds with one hash lookup; a cancel by fd walks every bucket of
        // the ring's poll table (io_uring/poll.c io_poll_file_find), twice per
        // connection: 2.7 % of the proxy's CPU under connection churn (perf).
        for (Side side : kBothSides)
            directions_.unwatch_source(conn, side);
    } else if (!conn.in_flight.idle()) {
        // Cancels polls, queued splices into these sockets and a pending connect.
        // Splices already running finish on their own: every one is non-blocking.
        for (const ConnSocket* socket : {&conn.client, &conn.upstream})
            if (socket->valid())
                shard_.io.cancel_fd(conn.in_flight, socket->ref(), conn.tag(Op::Cancel));
    }
    directions_.cancel_parked(conn); // bulk_park: splices that wait for data
    settle(conn);
}

void Connections::settle(Connection& conn) {
    if (conn.in_use && conn.phase == Phase::Closing && conn.in_flight.idle())
        finalize(conn);
}

void Connections::finalize(Connection& conn) {
    // A close that would send FIN resets instead when bytes would be lost with it (the
    // kernel does the same for a socket closed with input unread, RFC 2525 §2.17). One
    // handed over never does: its sockets live on in the successor.
    bool reset =
        closes_with_reset(conn.close_reason) ||
        (conn.close_reason != CloseReason::HandedOver && Directions::leaves_bytes_behind(conn));
    // Slots of the file table close through the ring: the connection stays until
    // those closes are in, then comes back here (settle()) with none left.
    if (close_slots(conn, reset))
        return;
    directions_.release(conn, /*verify=*/reset);
    if (reset) {
        for (const ConnSocket* socket : {&conn.client, &conn.upstream})
            if (socket->valid())
                set_reset_on_close(socket->fd());
    }
    // Moved to another shard of this engine: not closed at all, to the application.
    const bool moved = conn.close_reason == CloseReason::HandedOver && conn.move_to >= 0;
    if (shard_.config.observer && !moved) {
        notify_open(conn); // rejected while inspecting: opened and closed at once
        report_close(conn);
    }
    ShardRoute& r = *conn.route;
    connector_.release_member(conn);
    // A moved one's unit of the route's limit and its per-source entry went with it.
    if (!moved)
        SourceGate::release(conn);
    --r.active;
    if (conn.route_counted && !moved)
        shard_.doorbells->give_back(*r.route.limit, static_cast<std::size_t>(shard_.shard_index));
    ShardCounters& counters = shard_.io.counters();
    if (moved) {
        bump(counters.moved_out);
    } else {
        ++r.closed[static_cast<std::size_t>(conn.close_reason)];
        bump(counters.closed(conn.close_reason));
    }
    // A connection's bytes and times are counted once, by the engine (and the shard)
    // where it ends: one handed over is counted by the one that carries it on, from
    // its first byte.
    if (conn.close_reason != CloseReason::HandedOver)
        count_closed(conn, counters);
    const SocketUnits units = conn.units;
    table_.release(conn); // closes both sockets: their units may go back now
    drop(counters.active);
    room_(r, units);
}

void Connections::after_batch() {
    if (detached_ != nullptr || !moves_.empty())
        pause_leaving_connections();
    if (connector_.room_given_back())
        connector_.resume_member_waiters();
    directions_.resume_waiters(table_, [this](Connection& conn, Side side, const Outcome& o) {
        handle(conn, side, o);
        settle(conn);
    });
}

void Connections::close_idle() {
    table_.for_each_active([this](Connection& conn) {
        auto limit = conn.route->route.idle_timeout;
        if (conn.phase == Phase::Forwarding && limit.count() > 0 &&
            shard_.now - conn.last_active >= limit)
            close(conn, CloseReason::IdleTimeout);
        else if (past_max_duration(conn, shard_.now))
            close(conn, CloseReason::MaxDuration);
    });
}

void Connections::close_all(CloseReason reason) {
    table_.for_each_active([this, reason](Connection& conn) { close(conn, reason); });
}

} // namespace uringfwd::engine
