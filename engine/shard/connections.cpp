#include "shard/connections.hpp"

#include "net/sockets.hpp"

#include <cerrno>
#include <cstring>

namespace uringfwd::engine {

namespace {

std::string suppressed_note(uint64_t suppressed) {
    return suppressed == 0 ? std::string()
                           : fmt::format(" ({} similar failures not logged)", suppressed);
}

} // namespace

int Connections::open(int client_fd, bool client_is_tcp, const SocketAddress& upstream) {
    Connection& conn = table_.allocate();
    conn.client.reset(client_fd);
    conn.upstream_address = &upstream;
    ShardCounters& counters = shard_.io.counters();
    bump(counters.accepted);
    bump(counters.active);

    conn.upstream = open_stream_socket(upstream);
    if (!conn.upstream) {
        int err = errno;
        bump(counters.upstream_failures);
        if (upstream_failure_log_.allow(LogThrottle::Clock::now()))
            shard_.log.warn("cannot open a socket to the upstream ({}); resetting client {}{}",
                            std::strerror(err), peer_name(client_fd),
                            suppressed_note(upstream_failure_log_.suppressed()));
        close(conn, CloseReason::LocalError);
        return err;
    }
    if (client_is_tcp)
        set_no_delay(client_fd);
    if (upstream.family() != AF_UNIX)
        set_no_delay(conn.upstream.get());

    conn.dir(Side::ToUpstream).src = conn.client.get();
    conn.dir(Side::ToUpstream).dst = conn.upstream.get();
    conn.dir(Side::ToClient).src = conn.upstream.get();
    conn.dir(Side::ToClient).dst = conn.client.get();
    shard_.io.connect_with_timeout(conn.in_flight, conn.tag(Op::Connect),
                                   conn.tag(Op::ConnectTimeout), conn.upstream.get(), upstream,
                                   shard_.config.connect_timeout);
    return 0;
}

void Connections::on_completion(const OpTag& t, const uring::Completion& c) {
    Connection* found = table_.find(t.slot, t.generation);
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
    default:
        handle(conn, t.side, directions_.on_completion(conn, t.side, t.op, c));
    }
    settle(conn);
}

void Connections::on_connected(Connection& conn, int result) {
    if (conn.phase == Phase::Closing)
        return;
    if (result < 0) {
        bump(shard_.io.counters().upstream_failures);
        // The linked timeout cancels a connect that outlives it.
        bool timed_out = result == -ECANCELED || result == -ETIMEDOUT;
        std::string why = result == -ECANCELED ? fmt::format("no answer within {} ms",
                                                             shard_.config.connect_timeout.count())
                                               : errno_text(result);
        if (upstream_failure_log_.allow(LogThrottle::Clock::now()))
            shard_.log.warn("upstream {}: {}; resetting client {}{}",
                            to_endpoint(*conn.upstream_address).to_string(), why,
                            peer_name(conn.client.get()),
                            suppressed_note(upstream_failure_log_.suppressed()));
        close(conn, timed_out ? CloseReason::ConnectTimeout : CloseReason::Refused);
        return;
    }
    conn.phase = Phase::Forwarding;
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
    unsigned watches = (conn.dirs[0].watching ? 1u : 0u) + (conn.dirs[1].watching ? 1u : 0u);
    if (!conn.in_flight.idle() && conn.in_flight.ops == watches) {
        // The usual clean end: only error watches are left. Cancel them by tag, which
        // io_uring finds with one hash lookup; a cancel by fd walks every bucket of
        // the ring's poll table (io_uring/poll.c io_poll_file_find), twice per
        // connection: 2.7 % of the proxy's CPU under connection churn (perf).
        for (Side side : kBothSides)
            directions_.unwatch_source(conn, side);
    } else if (!conn.in_flight.idle()) {
        // Cancels polls, queued splices into these sockets and a pending connect.
        // Splices already running finish on their own: every one is non-blocking.
        for (const uring::UniqueFd* fd : {&conn.client, &conn.upstream})
            if (fd->valid())
                shard_.io.cancel_fd(conn.in_flight, fd->get(), conn.tag(Op::Cancel));
    }
    settle(conn);
}

void Connections::settle(Connection& conn) {
    if (conn.in_use && conn.phase == Phase::Closing && conn.in_flight.idle())
        finalize(conn);
}

void Connections::finalize(Connection& conn) {
    bool reset = closes_with_reset(conn.close_reason);
    directions_.release(conn, /*verify=*/reset);
    if (reset) {
        for (const uring::UniqueFd* fd : {&conn.client, &conn.upstream})
            if (fd->valid())
                set_reset_on_close(fd->get());
    }
    ShardCounters& counters = shard_.io.counters();
    bump(counters.closed(conn.close_reason));
    table_.release(conn); // closes both sockets
    drop(counters.active);
}

void Connections::after_batch() {
    directions_.resume_waiters(table_, [this](Connection& conn, Side side, const Outcome& o) {
        handle(conn, side, o);
        settle(conn);
    });
}

void Connections::close_all(CloseReason reason) {
    table_.for_each_active([this, reason](Connection& conn) { close(conn, reason); });
}

} // namespace uringfwd::engine
