// A connection whose every eligible member is at its max_connections waits for one to
// have room, as HAProxy queues a connection for a full server instead of refusing it:
// it holds its client socket and its place in the route, no upstream socket, and a
// timer for what is left of its connect deadline (HAProxy's "timeout queue"; here the
// route's connect_deadline, (retries + 1) x connect_timeout by default), after which it
// is reset as closed_no_upstream. Room given back at a member's limit, on this shard or
// another (its doorbell), lets the oldest waiters try again.
#include "shard/connection/upstream_connector.hpp"
#include "shard/inspect/client_addresses.hpp"

#include <algorithm>

namespace uringfwd::engine {

void UpstreamConnector::wait_for_member(Connection& conn) {
    ShardRoute& r = *conn.route;
    conn.attempt.waiting_member = true;
    ++r.member_waiting;
    r.want_member_room();
    member_waiters_.emplace_back(conn.slot, conn.generation);
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        conn.attempt.connect_deadline - shard_.now);
    shard_.io.timeout(conn.in_flight, conn.tag(Op::MemberWait),
                      std::max(left, std::chrono::milliseconds{1}));
}

void UpstreamConnector::stop_waiting_member(Connection& conn) {
    if (!conn.attempt.waiting_member)
        return;
    conn.attempt.waiting_member = false;
    ShardRoute& r = *conn.route;
    if (--r.member_waiting == 0)
        r.stop_wanting_member_room();
    // Its timer ends with -ECANCELED (or has fired already: then the cancel finds none).
    shard_.io.cancel(conn.in_flight, conn.tag(Op::MemberWait), conn.tag(Op::Cancel));
}

void UpstreamConnector::resume_member_waiters() {
    member_room_ = false;
    // Each waiter once, oldest first; one that finds no room yet goes to the back.
    for (std::size_t n = member_waiters_.size(); n > 0 && !member_waiters_.empty(); --n) {
        auto [slot, generation] = member_waiters_.front();
        member_waiters_.pop_front();
        Connection* conn = table_.find(slot, generation);
        if (conn == nullptr || !conn->attempt.waiting_member)
            continue; // closed, or gone on by other means
        conn->route->refresh_health(shard_.now);
        std::optional<PickedMember> member = pick_member(*conn);
        if (!member) {
            member_waiters_.emplace_back(slot, generation);
            continue;
        }
        stop_waiting_member(*conn);
        connect_member(*conn, *member);
        life_.settle(*conn);
    }
}

void UpstreamConnector::on_member_wait_over(Connection& conn, int result) {
    // Cancelled: a member had room, or the connection is closing.
    if (result != -ETIME || !conn.attempt.waiting_member || conn.phase == Phase::Closing)
        return;
    conn.attempt.waiting_member = false;
    ShardRoute& r = *conn.route;
    if (--r.member_waiting == 0)
        r.stop_wanting_member_room();
    if (upstream_failure_log_.allow(LogThrottle::Clock::now()))
        shard_.log.warn("route \"{}\": every upstream it may use is at its max_connections; "
                        "waited {} ms (the connect deadline); resetting client {}{}",
                        r.route.name,
                        std::chrono::duration_cast<std::chrono::milliseconds>(shard_.now -
                                                                              conn.record.opened_at)
                            .count(),
                        client_name(conn), suppressed_note(upstream_failure_log_.suppressed()));
    life_.close(conn, CloseReason::NoUpstream);
}

} // namespace uringfwd::engine
