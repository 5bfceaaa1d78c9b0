// The upstream attempt of a connection: choose a member of the route's pool (or follow
// the selector), connect to it with a timeout, and on failure to the next member within
// the route's connect deadline; wait when every member it may go to is full
// (member_wait.cpp); give up with a reason that is counted. What follows a connect or
// a failure belongs to the life cycle (ConnectionLife).
#pragma once

#include "shard/connection/connection.hpp"
#include "shard/connection/connection_life.hpp"
#include "shard/loop/shard_context.hpp"
#include "shard/shard_route.hpp"
#include "support/log_throttle.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace uringfwd::engine {

class UpstreamConnector {
public:
    // `table` finds a waiting connection again; `life` is told what the attempt ends in.
    UpstreamConnector(ShardContext& shard, ConnectionTable& table, ConnectionLife& life)
        : shard_(shard), table_(table), life_(life) {}

    // The route's selector decided: connect accordingly. Returns 0, or the errno when
    // no socket could be had for the upstream (Connections::open()).
    int follow_selection(Connection& conn, const Selection& selection);
    // Chooses the next member and connects to it; waits when every member it may go to
    // is full; closes the connection when no member is left. Returns as
    // follow_selection() does.
    int connect_next(Connection& conn);
    // The upstream socket was created (Op::Socket): connect it, or fail.
    void on_socket(Connection& conn, int result);
    // The connect completed (Op::Connect): forward, or try the next member.
    void on_connected(Connection& conn, int result);
    // The connection has its member no more (its connect failed, it closed): counted
    // out, and room given back at the member's limit wakes who waits for it.
    void release_member(Connection& conn);

    // member_wait.cpp: waiting for a member with room, up to the connect deadline.
    void stop_waiting_member(Connection& conn);
    void on_member_wait_over(Connection& conn, int result);
    // Connections waiting for a member with room try again (another shard may have
    // given room back at a member's limit).
    void resume_member_waiters();
    // A member's unit was given back on this shard since the last resume.
    bool room_given_back() const { return member_room_; }

private:
    struct PickedMember {
        std::size_t member;
        SharedLimit::Taken taken; // its unit of the member's limit (PoolState::opened)
    };
    // The member for the connection's next attempt, counted among its connections; none
    // when no candidate has room.
    std::optional<PickedMember> pick_member(Connection& conn);
    int connect_member(Connection& conn, PickedMember picked);
    void wait_for_member(Connection& conn);
    // One connect attempt to `address` (`name` for log lines) within `limit`.
    int connect_to(Connection& conn, const SocketAddress& address, const std::string& name,
                   std::chrono::milliseconds limit);
    // transparent = true: binds the upstream socket to the client's address (port 0);
    // false, with the attempt failed, when it cannot.
    bool bind_client_address(Connection& conn);
    // The source addresses the connection's upstream socket is bound to before its
    // connect to `address` (the member's, or the route's for the selector's address);
    // null when it is not bound (none configured, or a Unix upstream).
    const std::vector<SocketAddress>* sources_for(const Connection& conn,
                                                  const SocketAddress& address) const;
    // Binds the plain upstream socket to the next of `sources` of its family. False when
    // that failed: the attempt has failed then, as a refused connect does.
    bool bind_source(Connection& conn, const std::vector<SocketAddress>& sources);
    // The upstream socket is open (plain or a slot): its socket controls, then connect.
    void start_connect(Connection& conn);
    void connect_failed(Connection& conn, int result);
    // Every member the connection may try has failed: log it and reset the client.
    void give_up(Connection& conn);
    std::string failure_text(const Connection& conn) const;
    std::string tried_names(const Connection& conn) const;

    ShardContext& shard_;
    ConnectionTable& table_;
    ConnectionLife& life_;
    // Connections waiting for a member with room (slot, generation), oldest first.
    std::deque<std::pair<uint32_t, uint32_t>> member_waiters_;
    bool member_room_ = false; // a member's unit given back here: look at the waiters
    LogThrottle upstream_failure_log_;
    LogThrottle source_log_;
    LogThrottle mptcp_log_;
};

} // namespace uringfwd::engine
