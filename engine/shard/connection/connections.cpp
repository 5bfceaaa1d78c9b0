#include "shard/connection/connections.hpp"
#include "shard/connection/connection_deadlines.hpp"

#include "net/sockets.hpp"
#include "routing/hash.hpp"
#include "routing/name_refresher.hpp"
#include "shard/listener.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace uringfwd::engine {

namespace {

// The address the connection was forwarded to. A member's or the selector's address is
// the one connected to, known already: no getpeername(2) per connection for observers.
Endpoint upstream_endpoint(const Connection& conn) {
    if (conn.attempt.member >= 0)
        return to_endpoint(
            conn.route->route.members[static_cast<std::size_t>(conn.attempt.member)].address);
    if (conn.attempt.has_chosen)
        return to_endpoint(conn.attempt.chosen);
    return peer_endpoint(conn.upstream.fd()); // a pair handed over connected (forward_pair)
}

} // namespace

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
    ++r.accepted;
    ShardCounters& counters = shard_.io.counters();
    bump(counters.accepted);
    bump(counters.active);
    if (client.set_no_delay)
        no_delay(conn, conn.client);
    if (client.upstream.valid()) { // connected by the caller: forward at once
        notify_open(conn);
        client.upstream.serve_into(conn.upstream);
        conn.caller_upstream = true;
        start_forwarding(conn);
        return 0;
    }
    if (client.inspect && (!r.inspectors.empty() || client.listener_inspector)) {
        conn.inspect = std::make_unique<InspectState>();
        conn.inspect->listener_inspector = std::move(client.listener_inspector);
        return begin_inspect(conn);
    }
    return choose_upstream(conn);
}

int Connections::choose_upstream(Connection& conn) {
    ShardRoute& r = *conn.route;
    conn.phase = Phase::Connecting;
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
        return follow_selection(conn, r.route.selector(info_of(conn)));
    return connect_next(conn);
}

ConnectionInfo Connections::info_of(const Connection& conn) const {
    return {conn.record.id, shard_.shard_index, conn.route->route.name, conn.record.client_address,
            conn.record.local_address};
}

int Connections::follow_selection(Connection& conn, const Selection& selection) {
    const Route& route = conn.route->route;
    switch (selection.kind) {
    case Selection::Kind::Pool:
        break;
    case Selection::Kind::Member:
        if (selection.member < route.members.size())
            conn.attempt.preferred = static_cast<int>(selection.member);
        break;
    case Selection::Kind::Reject:
        close(conn, CloseReason::Rejected);
        return 0;
    case Selection::Kind::Address:
        // Only literals: looking a name up here would block the shard.
        if (is_host_name(selection.address)) {
            shard_.log.warn("route \"{}\": the selector chose {}, a host name; it must be an "
                            "address literal; resetting the client",
                            route.name, selection.address.to_string());
            close(conn, CloseReason::LocalError);
            return 0;
        }
        conn.attempt.chosen = resolve(selection.address);
        conn.attempt.has_chosen = true;
        return connect_to(conn, conn.attempt.chosen, selection.address.to_string(),
                          route.pool.connect_timeout);
    }
    return connect_next(conn);
}

int Connections::connect_next(Connection& conn) {
    ShardRoute& r = *conn.route;
    r.refresh_health(shard_.now);
    std::optional<PickedMember> member = pick_member(conn);
    if (!member && r.pool.only_full_left(conn.attempt.tried, shard_.now) &&
        shard_.now < conn.attempt.connect_deadline) {
        // Every member it may go to is at its max_connections: it waits for one, as
        // HAProxy queues for a full server (member_wait.cpp). Registered first, then
        // one more look: room given back before the registration rang nobody.
        r.want_member_room();
        member = pick_member(conn);
        if (!member) {
            wait_for_member(conn);
            return 0;
        }
        if (r.member_waiting == 0)
            r.stop_wanting_member_room();
    }
    if (!member) {
        if (conn.attempt.tried.empty()) {
            if (upstream_failure_log_.allow(LogThrottle::Clock::now()))
                shard_.log.warn("route \"{}\": no upstream is up; resetting client {}{}",
                                r.route.name, client_name(conn),
                                suppressed_note(upstream_failure_log_.suppressed()));
            close(conn, CloseReason::NoUpstream);
        } else {
            give_up(conn); // every member it may try has failed
        }
        return 0;
    }
    return connect_member(conn, *member);
}

std::optional<Connections::PickedMember> Connections::pick_member(Connection& conn) {
    ShardRoute& r = *conn.route;
    // Counted from now: connects in flight count towards the member's limit and
    // least-active, or a burst of clients would all pick the same member.
    // The selector's choice, unless full, or drained by the operator (runtime.hpp).
    if (conn.attempt.preferred >= 0 && conn.attempt.tried.empty() &&
        r.pool.state(static_cast<std::size_t>(conn.attempt.preferred)) == MemberState::Ready) {
        auto m = static_cast<std::size_t>(conn.attempt.preferred);
        if (SharedLimit::Taken taken = r.pool.opened(m); taken != SharedLimit::Taken::No)
            return PickedMember{m, taken};
    }
    // Another shard may take a member's last unit between choose() and opened(); it is
    // full then, and the next choose() passes it over.
    for (std::size_t attempt = 0; attempt <= r.route.members.size(); ++attempt) {
        std::optional<std::size_t> m =
            r.pool.choose(conn.attempt.client_hash, conn.attempt.tried, shard_.now);
        if (!m)
            return std::nullopt;
        if (SharedLimit::Taken taken = r.pool.opened(*m); taken != SharedLimit::Taken::No)
            return PickedMember{*m, taken};
    }
    return std::nullopt;
}

int Connections::connect_member(Connection& conn, PickedMember picked) {
    ShardRoute& r = *conn.route;
    const MemberRoute& target = r.route.members[picked.member];
    conn.attempt.member = static_cast<int>(picked.member);
    conn.attempt.tried.add(picked.member);
    conn.attempt.member_taken = picked.taken;
    // Each attempt gets the pool's connect timeout, cut to what is left of the deadline.
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        conn.attempt.connect_deadline - shard_.now);
    auto limit = std::clamp(left, std::chrono::milliseconds{1}, r.route.pool.connect_timeout);
    return connect_to(conn, target.address, target.name, limit);
}

void Connections::release_member(Connection& conn) {
    if (conn.attempt.member_taken == SharedLimit::Taken::No)
        return;
    ShardRoute& r = *conn.route;
    auto m = static_cast<std::size_t>(conn.attempt.member);
    SharedLimit::Taken taken = conn.attempt.member_taken;
    conn.attempt.member_taken = SharedLimit::Taken::No;
    r.pool.closed(m, taken); // gives the unit back
    if (taken == SharedLimit::Taken::Counted) {
        // Who waits for this member: this shard's connections (after the batch) and
        // the other shards' (their doorbells).
        member_room_ = true;
        r.pool.limit(m).for_each_wanting(static_cast<std::size_t>(shard_.shard_index),
                                         [this](std::size_t s) { shard_.doorbells->ring(s); });
    }
}

int Connections::connect_to(Connection& conn, const SocketAddress& address, const std::string& name,
                            std::chrono::milliseconds limit) {
    conn.attempt.connect_target = &address;
    conn.attempt.connect_name = name;
    conn.attempt.connect_limit = limit;
    if (shard_.direct) {
        // Into a slot of the file table: the socket completes (Op::Socket) before it
        // can be connected, see on_socket().
        shard_.io.socket_direct(conn.in_flight, conn.tag(Op::Socket), address.family());
        return 0;
    }
    conn.upstream.reset_plain(open_stream_socket(address).release());
    if (!conn.upstream.valid()) {
        int err = errno;
        bump(shard_.io.counters().upstream_failures);
        if (upstream_failure_log_.allow(LogThrottle::Clock::now()))
            shard_.log.warn("cannot open a socket to upstream {} ({}); resetting client {}{}", name,
                            is_fd_shortage(err) ? fd_shortage_cause(err) : std::strerror(err),
                            client_name(conn), suppressed_note(upstream_failure_log_.suppressed()));
        close(conn, CloseReason::LocalError);
        return err;
    }
    start_connect(conn);
    return 0;
}

void Connections::start_connect(Connection& conn) {
    if (conn.attempt.connect_target->family() != AF_UNIX)
        no_delay(conn, conn.upstream);
    shard_.io.connect_with_timeout(conn.in_flight, conn.tag(Op::Connect),
                                   conn.tag(Op::ConnectTimeout), conn.upstream.ref(),
                                   *conn.attempt.connect_target, conn.attempt.connect_limit);
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
    switch (t.op) {
    case Op::Connect:
        on_connected(conn, c.result);
        break;
    case Op::ConnectTimeout:
    case Op::Cancel:
        break;
    case Op::Socket:
        on_socket(conn, c.result);
        break;
    case Op::SocketOpt:
        --conn.socket_ops;
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
        on_inspect_read(conn, c.result);
        break;
    case Op::InspectTimeout:
        break;
    case Op::MemberWait:
        on_member_wait_over(conn, c.result);
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
    settle(conn);
}

void Connections::on_connected(Connection& conn, int result) {
    if (conn.phase == Phase::Closing)
        return;
    if (result < 0) {
        connect_failed(conn, result);
        return;
    }
    ShardRoute& r = *conn.route;
    if (conn.attempt.member >= 0) {
        auto m = static_cast<std::size_t>(conn.attempt.member);
        ++r.connects[m];
        if (r.pool.connect_succeeded(m, shard_.now))
            shard_.log.info("route \"{}\": upstream {} is up again", r.route.name,
                            r.route.members[m].name);
    }
    start_forwarding(conn);
}

void Connections::start_forwarding(Connection& conn) {
    conn.phase = Phase::Forwarding;
    conn.record.connected_at = conn.last_active = shard_.now;
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

void Connections::connect_failed(Connection& conn, int result) {
    ShardRoute& r = *conn.route;
    bump(shard_.io.counters().upstream_failures);
    // The linked timeout cancels a connect that outlives it: -ECANCELED.
    conn.attempt.last_error = result;
    bool timed_out = result == -ECANCELED || result == -ETIMEDOUT;
    conn.attempt.last_failure = timed_out ? CloseReason::ConnectTimeout : CloseReason::Refused;
    // The connect has completed: the kernel holds the socket no more.
    if (conn.upstream.fixed())
        close_slot(conn, conn.upstream, /*reset=*/false);
    conn.upstream.reset();
    if (conn.attempt.member < 0) { // the selector's own address: no pool, no failover
        give_up(conn);
        return;
    }
    auto m = static_cast<std::size_t>(conn.attempt.member);
    ++r.failures[m];
    ++r.failures_by[m][static_cast<std::size_t>(connect_failure_of(-result))];
    release_member(conn);
    if (r.pool.connect_failed(m, shard_.now))
        shard_.log.warn("route \"{}\": upstream {} is down ({})", r.route.name,
                        r.route.members[m].name, failure_text(conn));
    bool retries_left = conn.attempt.tried.size() <= r.route.pool.retries;
    if (retries_left && shard_.now < conn.attempt.connect_deadline)
        connect_next(conn);
    else
        give_up(conn);
}

std::string Connections::failure_text(const Connection& conn) const {
    if (conn.attempt.last_error == -ECANCELED)
        return fmt::format("no answer within {} ms",
                           conn.route->route.pool.connect_timeout.count());
    return errno_text(conn.attempt.last_error);
}

void Connections::give_up(Connection& conn) {
    conn.record.close_error =
        conn.attempt.last_error == -ECANCELED ? -ETIMEDOUT : conn.attempt.last_error;
    if (upstream_failure_log_.allow(LogThrottle::Clock::now()))
        shard_.log.warn("route \"{}\": upstream {}: {}; resetting client {}{}",
                        conn.route->route.name, tried_names(conn), failure_text(conn),
                        client_name(conn), suppressed_note(upstream_failure_log_.suppressed()));
    close(conn, conn.attempt.last_failure);
}

std::string Connections::tried_names(const Connection& conn) const {
    const Route& route = conn.route->route;
    if (conn.attempt.has_chosen)
        return to_endpoint(conn.attempt.chosen).to_string();
    std::string out;
    for (std::size_t m = 0; m < route.members.size(); ++m)
        if (conn.attempt.tried.contains(m))
            out += fmt::format("{}{}", out.empty() ? "" : ", ", route.members[m].name);
    return out;
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
    conn.phase = Phase::Closing;
    conn.close_reason = reason;
    stop_waiting_member(conn); // cancels its timer
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
    bool reset = closes_with_reset(conn.close_reason);
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
    if (shard_.config.observer) {
        notify_open(conn); // rejected while inspecting: opened and closed at once
        report_close(conn);
    }
    ShardRoute& r = *conn.route;
    release_member(conn);
    --r.active;
    if (conn.route_counted)
        shard_.doorbells->give_back(*r.route.limit, static_cast<std::size_t>(shard_.shard_index));
    ++r.closed[static_cast<std::size_t>(conn.close_reason)];
    ShardCounters& counters = shard_.io.counters();
    bump(counters.closed(conn.close_reason));
    count_closed(conn, counters);
    const SocketUnits units = conn.units;
    table_.release(conn); // closes both sockets: their units may go back now
    drop(counters.active);
    room_(r, units);
}

void Connections::after_batch() {
    if (member_room_)
        resume_member_waiters();
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
