// The life cycle of a shard's connections: choose a member of the route's pool for an
// accepted client, connect to it (with a timeout, and on failure to the next member,
// within the route's connect deadline), start both directions, and close the pair once
// both directions finished, one of them failed or the route's idle timeout passed,
// with a reason that is counted.
#pragma once

#include "shard/connection/connection.hpp"
#include "shard/directions/directions.hpp"
#include "shard/loop/shard_context.hpp"
#include "shard/shard_route.hpp"
#include "support/log_throttle.hpp"
#include "uringfwd/runtime.hpp"

#include <cstddef>
#include <deque>
#include <functional>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace uringfwd::engine {

class Connections {
public:
    // `room` is called with a route whenever one of its connections has gone (with the
    // units of the socket budget it held; none when it moved to another route).
    // `route_at` finds the shard's state of route `index` of `table` (an inspector's
    // route choice), null when the shard has none.
    using RouteLookup = std::function<ShardRoute*(const RouteTable& table, std::size_t index)>;
    using Room = std::function<void(ShardRoute&, SocketUnits)>;
    Connections(ShardContext& shard, Room room, RouteLookup route_at)
        : shard_(shard), room_(std::move(room)), route_at_(std::move(route_at)),
          directions_(shard) {}

    // A client of `route` was let in (WaitingClient: what it brings and holds): connect
    // it to a member of the route's pool, or forward at once to an upstream of the
    // caller's (forward_pair), or first let the route's inspectors (and the listen
    // address's) read its preamble. The connection owns the client's sockets from now
    // on. Returns 0, or the errno when no socket could be had for the upstream; the
    // client is then reset, and for a shortage of fds the caller pauses accepting.
    int open(ShardRoute& route, WaitingClient&& client);

    // A completion of one of a connection's operations (Owner::Connection).
    void on_completion(const OpTag& tag, const uring::Completion& c);

    // After every batch of completions (see Directions::resume_waiters).
    void after_batch();

    // member_wait.cpp: connections waiting for a member with room try again (another
    // shard may have given room back at a member's limit).
    void resume_member_waiters();

    // Closes, with FIN, the connections of routes with an idle timeout that moved no
    // byte for that long.
    void close_idle();

    // Closes every connection with RST, for `reason` (DrainTimeout or Stopped).
    void close_all(CloseReason reason);

    // connection_control.cpp: runtime control (uringfwd/runtime.hpp).
    // Adds the open connections that pass `filter` to `out` until it holds `limit`
    // (0: no limit).
    void snapshot(std::vector<OpenConnection>& out, const ConnectionFilter& filter,
                  std::size_t limit);
    // Closes the open connection with this id: false when there is none (or it is
    // closing already).
    bool close_by_id(uint64_t id, CloseReason reason);
    // Closes the open connections of the route named `route` (every route when empty),
    // of its member `member` when given: how many.
    std::size_t close_where(std::string_view route, std::string_view member, CloseReason reason);
    // Closes the forwarding connections of `route` (this shard's state of it) whose
    // member passes `member` (its index): how many.
    std::size_t close_forwarding_to(const ShardRoute& route,
                                    const std::function<bool(std::size_t)>& member,
                                    CloseReason reason);

    std::size_t active() const { return table_.active(); }
    Directions& directions() { return directions_; }

private:
    // After accept (and inspection): the selector or the pool chooses; connect.
    int choose_upstream(Connection& conn);
    // The client's addresses (inspected or the sockets'), for the observer, selector,
    // Maglev and a PROXY header; two syscalls the first time when not inspected.
    void fill_addresses(Connection& conn);
    // The same as Endpoints, for the observer and the selector.
    void fill_endpoints(Connection& conn);
    void notify_open(Connection& conn);
    // The client socket's own addresses (the transport's, not a PROXY header's): known
    // since the accept for a slot, asked of the kernel for a plain fd.
    std::optional<SocketAddress> socket_peer_of(const Connection& conn) const;
    SocketAddress socket_local_of(const Connection& conn) const;
    std::string client_name(const Connection& conn) const; // for log lines
    // direct_sockets.cpp: sockets in slots of the file table.
    // The upstream socket was created (Op::Socket): connect it, or fail.
    void on_socket(Connection& conn, int result);
    // Sets TCP_NODELAY on a socket: a syscall for a plain fd, through the ring for a slot.
    void no_delay(Connection& conn, const ConnSocket& socket);
    // Submits the close of every slot the connection holds (with SO_LINGER {1, 0}
    // first when `reset`); returns whether any was, so the caller waits for them.
    bool close_slots(Connection& conn, bool reset);
    // One slot: its close submitted, counted out of the table's gauge.
    void close_slot(Connection& conn, ConnSocket& socket, bool reset);
    void table_full(const char* what);
    // The plain fd installed for a finished direction's destination slot: shut it for
    // writing and close it (the slot keeps the socket).
    void on_half_close(Connection& conn, Side side, int result);
    // inspection.cpp: the inspect phase (inspect.hpp).
    int begin_inspect(Connection& conn);
    void read_more(Connection& conn);
    void on_inspect_read(Connection& conn, int result);
    // Asks the chain about what has been read; ends the phase when it is through.
    void run_inspectors(Connection& conn);
    void reject_inspected(Connection& conn, CloseReason reason, std::string_view who,
                          const std::string& detail);
    void move_to_route(Connection& conn, std::size_t index);
    // preamble.cpp: puts the route's (or member's) PROXY header before the preamble.
    void add_proxy_header(Connection& conn);
    // The inspector at the connection's stage: the route's chain, then the listener's;
    // null when the connection is through them all.
    static const Inspector* stage_of(const Connection& conn);
    // Chooses the next member and connects to it; waits when every member it may go to
    // is full; closes the connection when no member is left. Returns an errno as open()
    // does.
    int connect_next(Connection& conn);
    struct PickedMember {
        std::size_t member;
        SharedLimit::Taken taken; // its unit of the member's limit (PoolState::opened)
    };
    // The member for the connection's next attempt, counted among its connections; none
    // when no candidate has room.
    std::optional<PickedMember> pick_member(Connection& conn);
    int connect_member(Connection& conn, PickedMember picked);
    // The connection has its member no more (its connect failed, it closed): counted
    // out, and room given back at the member's limit wakes who waits for it.
    void release_member(Connection& conn);
    // member_wait.cpp: waiting for a member with room, up to the connect deadline.
    void wait_for_member(Connection& conn);
    void stop_waiting_member(Connection& conn);
    void on_member_wait_over(Connection& conn, int result);
    void on_connected(Connection& conn, int result);
    void start_forwarding(Connection& conn);
    void on_preamble_sent(Connection& conn, int result);
    void send_preamble(Connection& conn);
    // What the observer and the selector see (observer.hpp).
    ConnectionInfo info_of(const Connection& conn) const;
    void report_close(const Connection& conn);
    // The route's selector decided: connect accordingly. Returns as open() does.
    int follow_selection(Connection& conn, const Selection& selection);
    // One connect attempt to `address` (`name` for log lines) within `limit`.
    int connect_to(Connection& conn, const SocketAddress& address, const std::string& name,
                   std::chrono::milliseconds limit);
    // The upstream socket is open (plain or a slot): connect it.
    void start_connect(Connection& conn);
    void connect_failed(Connection& conn, int result);
    // Every member the connection may try has failed: log it and reset the client.
    void give_up(Connection& conn);
    std::string failure_text(const Connection& conn) const;
    void handle(Connection& conn, Side side, const Outcome& outcome);
    // Starts closing: cancels what is in flight; the slot is freed once nothing is.
    // A second call keeps the first reason.
    void close(Connection& conn, CloseReason reason);
    void settle(Connection& conn);
    void finalize(Connection& conn);
    void count_closed(const Connection& conn, ShardCounters& counters);
    std::string tried_names(const Connection& conn) const;
    // connection_control.cpp
    static bool matches(const Connection& conn, std::string_view route, std::string_view member);
    std::string upstream_text(const Connection& conn) const;

    ShardContext& shard_;
    Room room_;
    RouteLookup route_at_;
    Directions directions_;
    ConnectionTable table_;
    uint64_t opened_ = 0; // connections opened: the low bits of their ids
    // Connections waiting for a member with room (slot, generation), oldest first.
    std::deque<std::pair<uint32_t, uint32_t>> member_waiters_;
    bool member_room_ = false; // a member's unit given back here: look at the waiters
    LogThrottle upstream_failure_log_;
    LogThrottle inspect_reject_log_;
    LogThrottle table_full_log_;
};

} // namespace uringfwd::engine
