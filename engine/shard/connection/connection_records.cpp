// What a closed connection leaves behind: the observer's record of it and its counts
// (per route and member bytes, the connect-time and duration histograms).
#include "shard/connection/connections.hpp"
#include "shard/inspect/client_addresses.hpp"

namespace uringfwd::engine {

namespace {

// Where a connection that never reached an upstream was going: the member (or the
// selector's address) its last connect went to, whose refusal or timeout its reason
// and error tell; empty when none was chosen (rejected while inspecting, no member up).
Endpoint last_attempt(const Connection& conn) {
    if (conn.attempt.member >= 0)
        return to_endpoint(
            conn.route->route.members[static_cast<std::size_t>(conn.attempt.member)].address);
    if (conn.attempt.has_chosen)
        return to_endpoint(conn.attempt.chosen);
    return {};
}

} // namespace

void Connections::notify_open(Connection& conn) {
    if (shard_.config.observer && !conn.record.observed) {
        fill_endpoints(conn);
        conn.record.observed = true;
        shard_.config.observer->on_open(info_of(conn));
    }
}

ConnectionInfo Connections::info_of(const Connection& conn) const {
    return {conn.record.id, shard_.shard_index, conn.route->route.name, conn.record.client_address,
            conn.record.local_address};
}

void Connections::report_close(const Connection& conn) {
    using std::chrono::duration_cast;
    using std::chrono::microseconds;
    ConnectionRecord record;
    record.info = {conn.record.id, shard_.shard_index, conn.route->route.name,
                   conn.record.client_address, conn.record.local_address};
    bool connected = conn.record.connected_at.time_since_epoch().count() != 0;
    record.upstream = connected ? conn.record.upstream_address : last_attempt(conn);
    record.bytes_to_upstream = conn.bytes[static_cast<int>(Side::ToUpstream)];
    record.bytes_to_client = conn.bytes[static_cast<int>(Side::ToClient)];
    if (connected)
        record.connect_time =
            duration_cast<microseconds>(conn.record.connected_at - conn.record.opened_at);
    record.duration = duration_cast<microseconds>(shard_.now - conn.record.opened_at);
    record.reason = conn.close_reason;
    record.error = -conn.record.close_error;
    shard_.config.observer->on_close(record);
}

// Per route and member bytes and the two histograms: plain adds on this shard's own
// memory, once per connection rather than per transfer.
void Connections::count_closed(const Connection& conn, ShardCounters& counters) {
    ShardRoute& r = *conn.route;
    const uint64_t up = conn.bytes[static_cast<int>(Side::ToUpstream)];
    const uint64_t down = conn.bytes[static_cast<int>(Side::ToClient)];
    r.bytes_to_upstream += up;
    r.bytes_to_client += down;
    bool connected = conn.record.connected_at.time_since_epoch().count() != 0;
    if (connected && conn.attempt.member >= 0) {
        auto m = static_cast<std::size_t>(conn.attempt.member);
        r.member_bytes_to_upstream[m] += up;
        r.member_bytes_to_client[m] += down;
    }
    using std::chrono::duration_cast;
    using std::chrono::microseconds;
    if (connected)
        counters.connect_time.observe(
            duration_cast<microseconds>(conn.record.connected_at - conn.record.opened_at));
    counters.duration.observe(duration_cast<microseconds>(shard_.now - conn.record.opened_at));
}

} // namespace uringfwd::engine
