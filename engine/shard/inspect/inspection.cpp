// The inspect phase of a connection (inspect.hpp): read the client's preamble into a
// buffer of its own and run the route's inspectors over it before an upstream is
// chosen.
//
// The deadline is a timeout linked to each recv (ShardIo::recv_with_timeout) rather
// than the shard's idle sweep: the sweep exists only when some route has an idle
// timeout, ticks at that route's granularity and walks every connection, while a link
// costs one extra completion per read, only on routes that inspect, and ends a silent
// client at its own deadline to the millisecond. Each read gets what is left of the
// deadline, so a client that trickles one byte at a time cannot stretch it.
#include "shard/inspect/inspection.hpp"
#include "net/sockets.hpp"
#include "shard/inspect/client_addresses.hpp"

#include <algorithm>
#include <cerrno>

namespace uringfwd::engine {

namespace {

// The first read: enough for a PROXY header and a ClientHello of today; grown (up to
// kInspectBufferCap) only when an inspector asks for more than fits.
constexpr std::size_t kFirstRead = 4096;

std::string transport_name(const SocketAddress& peer) {
    if (peer.length == 0)
        return "?";
    if (peer.family() == AF_UNIX)
        return "unix peer";
    return to_endpoint(peer).to_string();
}

} // namespace

int Inspection::begin_inspect(Connection& conn) {
    conn.phase = Phase::Inspecting;
    if (std::optional<SocketAddress> peer = socket_peer_of(conn))
        conn.inspect->transport_peer = *peer;
    conn.inspect->deadline = shard_.now + conn.route->route.inspect_timeout;
    run_inspectors(conn); // with no bytes yet: an inspector may reject at once
    return 0;
}

void Inspection::read_more(Connection& conn) {
    if (conn.inspect->read == conn.inspect->buffer.size()) {
        if (conn.inspect->buffer.size() >= kInspectBufferCap) {
            reject_inspected(conn, CloseReason::InspectOversized, stage_of(conn)->name(),
                             fmt::format("more than {} bytes", kInspectBufferCap));
            return;
        }
        std::size_t grown =
            conn.inspect->buffer.empty() ? kFirstRead : conn.inspect->buffer.size() * 2;
        conn.inspect->buffer.resize(std::min(grown, kInspectBufferCap));
    }
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(conn.inspect->deadline - shard_.now);
    if (left.count() <= 0) {
        on_inspect_read(conn, -ECANCELED); // already late: as if the timeout had fired
        return;
    }
    shard_.io.recv_with_timeout(conn.in_flight, conn.tag(Op::InspectRecv),
                                conn.tag(Op::InspectTimeout), conn.client.ref(),
                                conn.inspect->buffer.data() + conn.inspect->read,
                                conn.inspect->buffer.size() - conn.inspect->read, left);
}

void Inspection::on_inspect_read(Connection& conn, int result) {
    if (conn.phase != Phase::Inspecting)
        return; // closing: the recv was cancelled
    std::string_view who = stage_of(conn)->name();
    if (result == -ECANCELED || result == -ETIME) {
        reject_inspected(conn, CloseReason::InspectTimeout, who,
                         fmt::format("nothing complete within {} ms",
                                     conn.route->route.inspect_timeout.count()));
        return;
    }
    if (result == -EINTR || result == -EAGAIN) {
        read_more(conn);
        return;
    }
    if (result < 0) {
        conn.record.close_error = result;
        life_.close(conn, CloseReason::ClientReset);
        return;
    }
    if (result == 0) {
        reject_inspected(conn, CloseReason::InspectIncomplete, who,
                         fmt::format("the client closed after {} bytes", conn.inspect->read));
        return;
    }
    conn.inspect->read += static_cast<std::size_t>(result);
    run_inspectors(conn);
}

void Inspection::run_inspectors(Connection& conn) {
    while (const Inspector* stage = stage_of(conn)) {
        const Inspector& inspector = *stage;
        std::span<const std::byte> unseen(conn.inspect->buffer.data() + conn.inspect->consumed,
                                          conn.inspect->read - conn.inspect->consumed);
        InspectVerdict verdict = inspector.inspect({unseen, conn.inspect->transport_peer});
        switch (verdict.kind) {
        case InspectVerdict::Kind::NeedMore:
            read_more(conn);
            return;
        case InspectVerdict::Kind::Reject:
            reject_inspected(conn, verdict.reason, inspector.name(), verdict.detail);
            return;
        case InspectVerdict::Kind::Done:
            break;
        }
        conn.inspect->consumed += std::min(verdict.consumed, unseen.size());
        if (verdict.client) {
            conn.client_sa = *verdict.client;
            conn.local_sa = verdict.local ? *verdict.local : socket_local_of(conn);
            conn.has_addresses = true;
        }
        if (!verdict.tlvs.empty())
            conn.proxy_tlvs = std::move(verdict.tlvs);
        ++conn.inspect->stage;
        if (verdict.route) {
            move_to_route(conn, *verdict.route);
            if (conn.phase == Phase::Closing)
                return;
            // The new route's own chain is not run: one pass, with the route the
            // listener's chain settled on.
            break;
        }
    }
    // Through: what is left belongs to the stream and goes to the upstream first.
    conn.preamble.assign(
        conn.inspect->buffer.begin() + static_cast<std::ptrdiff_t>(conn.inspect->consumed),
        conn.inspect->buffer.begin() + static_cast<std::ptrdiff_t>(conn.inspect->read));
    conn.inspect.reset();        // the phase is over: its buffer and chain go
    life_.choose_upstream(conn); // its failures close the connection themselves
}

const Inspector* Inspection::stage_of(const Connection& conn) {
    const InspectorChain& chain = conn.route->inspectors;
    if (conn.inspect->stage < chain.size())
        return chain[conn.inspect->stage].get();
    if (conn.inspect->stage == chain.size())
        return conn.inspect->listener_inspector.get();
    return nullptr;
}

void Inspection::move_to_route(Connection& conn, std::size_t index) {
    ShardRoute* to = route_at_ ? route_at_(*conn.route->table, index) : nullptr;
    if (to == nullptr) {
        shard_.log.warn("route \"{}\": an inspector chose route #{}, which this shard does not "
                        "serve; resetting client {}",
                        conn.route->route.name, index,
                        transport_name(conn.inspect->transport_peer));
        life_.close(conn, CloseReason::LocalError);
        return;
    }
    if (to == conn.route)
        return;
    ShardRoute& from = *conn.route;
    --from.active;
    --from.accepted;
    if (conn.route_counted)
        shard_.doorbells->give_back(*from.route.limit,
                                    static_cast<std::size_t>(shard_.shard_index));
    conn.route = to;
    ++to->active;
    ++to->accepted;
    // Counted where it is now, whatever that route's limit: the shared listener belongs
    // to the first route, whose limit let it in (README, "Limits").
    conn.route_counted = to->route.limit->limit() != 0;
    if (conn.route_counted)
        to->route.limit->take();
    life_.left_route(from); // its units go with it
}

void Inspection::reject_inspected(Connection& conn, CloseReason reason, std::string_view who,
                                  const std::string& detail) {
    if (inspect_reject_log_.allow(LogThrottle::Clock::now()))
        shard_.log.warn("route \"{}\": client {}: {}: {}; resetting it ({}){}",
                        conn.route->route.name, transport_name(conn.inspect->transport_peer), who,
                        detail, to_string(reason),
                        suppressed_note(inspect_reject_log_.suppressed()));
    // The observer (if any) sees who really connected: no header was accepted.
    if (!conn.has_addresses && conn.inspect->transport_peer.length > 0) {
        conn.client_sa = conn.inspect->transport_peer;
        conn.local_sa = socket_local_of(conn);
        conn.has_addresses = true;
    }
    life_.close(conn, reason);
}

} // namespace uringfwd::engine
