// The upstream attempt (upstream_connector.hpp): pick a member, connect within the
// pool's connect timeout, fail over to the next member within the route's connect
// deadline, give up with the last failure's reason.
#include "shard/connection/upstream_connector.hpp"

#include "net/sockets.hpp"
#include "routing/name_refresher.hpp"
#include "shard/connection/direct_sockets.hpp"
#include "shard/connection/socket_controls.hpp"
#include "shard/inspect/client_addresses.hpp"
#include "shard/listener.hpp"

#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace uringfwd::engine {

namespace {
// Port 0 in an IPv4 or IPv6 address: bind(2) then leaves the port to the connect.
void clear_port(SocketAddress& address) {
    if (address.family() == AF_INET)
        reinterpret_cast<sockaddr_in*>(&address.storage)->sin_port = 0;
    else if (address.family() == AF_INET6)
        reinterpret_cast<sockaddr_in6*>(&address.storage)->sin6_port = 0;
}

// Binds an upstream socket to `address` (port 0) before its connect; 0 or an errno.
// Without IP_BIND_ADDRESS_NO_PORT bind() would take a port for the address alone, one of
// its ephemeral ports per connection whatever the destination; with it the port is
// chosen at connect, per destination (net/ipv4/inet_hashtables.c __inet_hash_connect),
// so an address holds ~28k connections to each upstream.
int bind_before_connect(int fd, const SocketAddress& address) {
    const int one = 1;
    ::setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
    return ::bind(fd, address.get(), address.length) == 0 ? 0 : errno;
}
} // namespace

int UpstreamConnector::follow_selection(Connection& conn, const Selection& selection) {
    const Route& route = conn.route->route;
    switch (selection.kind) {
    case Selection::Kind::Pool:
        break;
    case Selection::Kind::Member:
        if (selection.member < route.members.size())
            conn.attempt.preferred = static_cast<int>(selection.member);
        break;
    case Selection::Kind::Reject:
        life_.close(conn, CloseReason::Rejected);
        return 0;
    case Selection::Kind::Address:
        // Only literals: looking a name up here would block the shard.
        if (is_host_name(selection.address)) {
            shard_.log.warn("route \"{}\": the selector chose {}, a host name; it must be an "
                            "address literal; resetting the client",
                            route.name, selection.address.to_string());
            life_.close(conn, CloseReason::LocalError);
            return 0;
        }
        conn.attempt.chosen = resolve(selection.address);
        conn.attempt.has_chosen = true;
        return connect_to(conn, conn.attempt.chosen, selection.address.to_string(),
                          route.pool.connect_timeout);
    }
    return connect_next(conn);
}

int UpstreamConnector::connect_next(Connection& conn) {
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
            life_.close(conn, CloseReason::NoUpstream);
        } else {
            give_up(conn); // every member it may try has failed
        }
        return 0;
    }
    return connect_member(conn, *member);
}

std::optional<UpstreamConnector::PickedMember> UpstreamConnector::pick_member(Connection& conn) {
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

int UpstreamConnector::connect_member(Connection& conn, PickedMember picked) {
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

void UpstreamConnector::release_member(Connection& conn) {
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

int UpstreamConnector::connect_to(Connection& conn, const SocketAddress& address,
                                  const std::string& name, std::chrono::milliseconds limit) {
    conn.attempt.connect_target = &address;
    conn.attempt.connect_name = name;
    conn.attempt.connect_limit = limit;
    const std::vector<SocketAddress>* sources = sources_for(conn, address);
    const bool mptcp =
        conn.attempt.member >= 0 && address.family() != AF_UNIX &&
        conn.route->route.members[static_cast<std::size_t>(conn.attempt.member)].mptcp;
    // A socket bound to a source is a plain fd, direct descriptors or not: the liburing
    // this builds with has no io_uring_prep_bind (IORING_OP_BIND, 6.11) to bind a slot,
    // and a slot has no fd for bind(2) (docs/kernel.md §11). So is an MPTCP one: whether
    // it falls back to TCP is socket(2)'s errno, known at once here.
    const bool transparent = conn.route->route.transparent && address.family() != AF_UNIX;
    if (shard_.direct && sources == nullptr && !mptcp && !transparent) {
        // Into a slot of the file table: the socket completes (Op::Socket) before it
        // can be connected, see on_socket().
        shard_.io.socket_direct(conn.in_flight, conn.tag(Op::Socket), address.family());
        return 0;
    }
    std::string mptcp_fallback;
    conn.upstream.reset_plain(
        (mptcp ? open_mptcp_socket(address, mptcp_fallback) : open_stream_socket(address))
            .release());
    if (!mptcp_fallback.empty() && mptcp_log_.allow(LogThrottle::Clock::now()))
        shard_.log.warn("route \"{}\": upstream {} has mptcp = true, but {}; connecting with "
                        "TCP{}",
                        conn.route->route.name, name, mptcp_fallback,
                        suppressed_note(mptcp_log_.suppressed()));
    if (!conn.upstream.valid()) {
        int err = errno;
        bump(shard_.io.counters().upstream_failures);
        if (upstream_failure_log_.allow(LogThrottle::Clock::now()))
            shard_.log.warn("cannot open a socket to upstream {} ({}); resetting client {}{}", name,
                            is_fd_shortage(err) ? fd_shortage_cause(err) : std::strerror(err),
                            client_name(conn), suppressed_note(upstream_failure_log_.suppressed()));
        life_.close(conn, CloseReason::LocalError);
        return err;
    }
    if (sources != nullptr && !bind_source(conn, *sources))
        return 0;
    if (transparent && !bind_client_address(conn))
        return 0;
    start_connect(conn);
    return 0;
}

const std::vector<SocketAddress>*
UpstreamConnector::sources_for(const Connection& conn, const SocketAddress& address) const {
    const Route& route = conn.route->route;
    const std::vector<SocketAddress>& sources =
        conn.attempt.member >= 0
            ? route.members[static_cast<std::size_t>(conn.attempt.member)].source
            : route.source;
    if (sources.empty() || address.family() == AF_UNIX)
        return nullptr;
    return &sources;
}

bool UpstreamConnector::bind_source(Connection& conn, const std::vector<SocketAddress>& sources) {
    ShardRoute& r = *conn.route;
    const SocketAddress& target = *conn.attempt.connect_target;
    // Round-robin per member (the selector's addresses take the last turn counter), so
    // each member's connections spread over every source.
    const std::size_t counter = conn.attempt.member >= 0
                                    ? static_cast<std::size_t>(conn.attempt.member)
                                    : r.route.members.size();
    const uint64_t turn = counter < r.source_turns.size() ? r.source_turns[counter]++ : 0;
    const SocketAddress* source = pick_source(sources, target.family(), turn);
    int err = EAFNOSUPPORT; // none of the upstream's family
    if (source != nullptr)
        err = bind_before_connect(conn.upstream.fd(), *source);
    if (err == 0)
        return true;
    if (source_log_.allow(LogThrottle::Clock::now()))
        shard_.log.warn("route \"{}\": cannot bind the socket to upstream {} to source {} ({}); "
                        "the attempt fails as a refused connect would{}",
                        r.route.name, conn.attempt.connect_name,
                        source != nullptr ? to_endpoint(*source).host : std::string("address"),
                        source != nullptr ? std::strerror(err)
                                          : "no source address of the upstream's family",
                        suppressed_note(source_log_.suppressed()));
    connect_failed(conn, -err);
    return false;
}

bool UpstreamConnector::bind_client_address(Connection& conn) {
    const SocketAddress& target = *conn.attempt.connect_target;
    std::optional<SocketAddress> client = client_address_of(conn);
    int err = EAFNOSUPPORT; // a Unix client, or one of the other family
    if (client && client->family() == target.family()) {
        clear_port(*client);
        err = set_transparent(conn.upstream.fd(), target.family());
        if (err == 0)
            err = bind_before_connect(conn.upstream.fd(), *client);
    }
    if (err == 0)
        return true;
    if (source_log_.allow(LogThrottle::Clock::now()))
        shard_.log.warn("route \"{}\": cannot bind the transparent socket to upstream {} to the "
                        "client's address {} ({}); the attempt fails as a refused connect "
                        "would{}",
                        conn.route->route.name, conn.attempt.connect_name,
                        client ? to_endpoint(*client).to_string() : std::string("?"),
                        std::strerror(err), suppressed_note(source_log_.suppressed()));
    connect_failed(conn, -err);
    return false;
}

void UpstreamConnector::start_connect(Connection& conn) {
    const int family = conn.attempt.connect_target->family();
    if (family != AF_UNIX)
        no_delay(shard_.io, conn, conn.upstream);
    // Before the connect, so the SYN already carries the mark and the TOS.
    OptionFailure failed = set_options(shard_.io, conn, conn.upstream, Side::ToClient,
                                       conn.route->route.upstream_options.of(family));
    if (failed.option != nullptr)
        life_.socket_control_failed(conn, Side::ToClient, failed.option->what, failed.error);
    if (family != AF_UNIX && conn.attempt.member >= 0) {
        const MemberRoute& member =
            conn.route->route.members[static_cast<std::size_t>(conn.attempt.member)];
        failed =
            set_options(shard_.io, conn, conn.upstream, Side::ToClient, member.connect_options);
        if (failed.option != nullptr)
            life_.socket_control_failed(conn, Side::ToClient, failed.option->what, failed.error);
    }
    shard_.io.connect_with_timeout(conn.in_flight, conn.tag(Op::Connect),
                                   conn.tag(Op::ConnectTimeout), conn.upstream.ref(),
                                   *conn.attempt.connect_target, conn.attempt.connect_limit);
}

void UpstreamConnector::on_connected(Connection& conn, int result) {
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
    life_.start_forwarding(conn);
}

void UpstreamConnector::connect_failed(Connection& conn, int result) {
    ShardRoute& r = *conn.route;
    bump(shard_.io.counters().upstream_failures);
    // The linked timeout cancels a connect that outlives it: -ECANCELED.
    conn.attempt.last_error = result;
    bool timed_out = result == -ECANCELED || result == -ETIMEDOUT;
    conn.attempt.last_failure = timed_out ? CloseReason::ConnectTimeout : CloseReason::Refused;
    // The connect has completed: the kernel holds the socket no more.
    if (conn.upstream.fixed())
        close_slot(shard_.io, conn, conn.upstream, /*reset=*/false);
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

std::string UpstreamConnector::failure_text(const Connection& conn) const {
    if (conn.attempt.last_error == -ECANCELED)
        return fmt::format("no answer within {} ms",
                           conn.route->route.pool.connect_timeout.count());
    return errno_text(conn.attempt.last_error);
}

void UpstreamConnector::give_up(Connection& conn) {
    conn.record.close_error =
        conn.attempt.last_error == -ECANCELED ? -ETIMEDOUT : conn.attempt.last_error;
    if (upstream_failure_log_.allow(LogThrottle::Clock::now()))
        shard_.log.warn("route \"{}\": upstream {}: {}; resetting client {}{}",
                        conn.route->route.name, tried_names(conn), failure_text(conn),
                        client_name(conn), suppressed_note(upstream_failure_log_.suppressed()));
    life_.close(conn, conn.attempt.last_failure);
}

std::string UpstreamConnector::tried_names(const Connection& conn) const {
    const Route& route = conn.route->route;
    if (conn.attempt.has_chosen)
        return to_endpoint(conn.attempt.chosen).to_string();
    std::string out;
    for (std::size_t m = 0; m < route.members.size(); ++m)
        if (conn.attempt.tried.contains(m))
            out += fmt::format("{}{}", out.empty() ? "" : ", ", route.members[m].name);
    return out;
}

void UpstreamConnector::on_socket(Connection& conn, int result) {
    if (result >= 0) {
        conn.upstream.set_slot(result);
        bump(shard_.io.counters().direct_slots);
        if (conn.phase != Phase::Closing) // else finalize() closes the slot
            start_connect(conn);
        return;
    }
    if (conn.phase == Phase::Closing)
        return;
    bump(shard_.io.counters().upstream_failures);
    if (result == -ENFILE) {
        life_.table_full("upstream socket");
    } else if (upstream_failure_log_.allow(LogThrottle::Clock::now())) {
        shard_.log.warn("cannot open a socket to upstream {} ({}); resetting client {}{}",
                        conn.attempt.connect_name, std::strerror(-result), client_name(conn),
                        suppressed_note(upstream_failure_log_.suppressed()));
    }
    conn.record.close_error = result;
    life_.close(conn, CloseReason::LocalError);
}

} // namespace uringfwd::engine
