// The life cycle of a shard's connections: open one for an accepted client, let its
// inspect phase (Inspection) and its upstream attempt (UpstreamConnector) run, start
// both directions, and close the pair once both directions finished, one of them
// failed or the route's idle timeout passed, with a reason that is counted. It holds
// the table, dispatches every completion of a connection's and keeps the observer's
// records.
#pragma once

#include "shard/connection/connection.hpp"
#include "shard/connection/connection_life.hpp"
#include "shard/connection/source_gate.hpp"
#include "shard/connection/upstream_connector.hpp"
#include "shard/directions/directions.hpp"
#include "shard/handover/detached_queue.hpp"
#include "shard/inspect/inspection.hpp"
#include "shard/loop/shard_context.hpp"
#include "shard/shard_route.hpp"
#include "support/log_throttle.hpp"
#include "uringfwd/handover.hpp"
#include "uringfwd/runtime.hpp"

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace uringfwd::engine {

class Connections : private ConnectionLife {
public:
    // `room` is called with a route whenever one of its connections has gone (with the
    // units of the socket budget it held; none when it moved to another route).
    // `route_at` finds the shard's state of route `index` of `table` (an inspector's
    // route choice), null when the shard has none.
    using RouteLookup = Inspection::RouteLookup;
    using Room = std::function<void(ShardRoute&, SocketUnits)>;
    // `moved` takes a connection detached for a move to shard `to` of this engine
    // (request_move), with what the application knows of it.
    using Moved = std::function<void(DetachedConnection&&, Resumed::SameEngine&&, int to)>;
    Connections(ShardContext& shard, Room room, RouteLookup route_at, Moved moved)
        : shard_(shard), room_(std::move(room)), moved_(std::move(moved)), directions_(shard),
          connector_(shard, table_, *this), inspection_(shard, *this, std::move(route_at)),
          gate_(shard) {}

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

    // Connections waiting for a member with room try again (another shard may have
    // given room back at a member's limit): UpstreamConnector, member_wait.cpp.
    void resume_member_waiters() { connector_.resume_member_waiters(); }

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

    // connection_handover.cpp: an upgrade's connection hand-over (docs/handover.md).
    // With a queue, every forwarding connection is detached as soon as it is quiet (no
    // byte held, nothing in flight but its reads) and pushed to it, which owns its
    // sockets from then on; with none (the hand-over ended), those being paused are
    // served on. UnsentBytes::GoAlong: a connection whose only bytes held are in a pipe
    // its destination has not taken is quiet too, and goes with the pipe.
    void set_handover(DetachedQueue* queue, UnsentBytes unsent);
    bool handing_over() const { return detached_ != nullptr; }

    // Moves between shards (Engine::move_connection), the same steps: the connection
    // with this id moves to shard `to` once it is quiet, within `limit` or not at all
    // (request_moves: kDefaultMoveLimit). Empty, or why it cannot. `current` tells whether a route
    // is one of the shard's current table (the other shard has the same).
    using CurrentRoute = std::function<bool(const ShardRoute&)>;
    // Nothing when no connection of this shard has the id.
    std::optional<std::string> request_move(uint64_t id, int to, std::chrono::milliseconds limit,
                                            const CurrentRoute& current);
    // Up to `count` forwarding connections not moving yet move to `to`: how many were
    // asked to.
    std::size_t request_moves(std::size_t count, int to, const CurrentRoute& current);
    // The shard stops: moves not yet pausing give up (the shard they would go to may
    // end before it takes them), and none is taken from now on.
    void stop_moves();
    // Connections asked to move and not gone yet.
    std::size_t pending_moves() const { return moves_.size(); }

    // Connections are leaving (a hand-over, moves): the shard looks at them again
    // every few tens of milliseconds even when nothing else completes (LeaveTick).
    bool has_leaving() const { return detached_ != nullptr || !moves_.empty(); }

    std::size_t active() const { return table_.active(); }
    Directions& directions() { return directions_; }

private:
    // ConnectionLife: what the inspect phase and the upstream attempt ask for.
    int choose_upstream(Connection& conn) override;
    void start_forwarding(Connection& conn) override;
    // Starts closing: cancels what is in flight; the slot is freed once nothing is.
    // A second call keeps the first reason.
    void close(Connection& conn, CloseReason reason) override;
    void settle(Connection& conn) override;
    void left_route(ShardRoute& route) override { room_(route, {}); }
    // direct_sockets.cpp: sockets in slots of the file table.
    void table_full(const char* what) override;
    // socket_controls.cpp: the route's client_keepalive and client_user_timeout on the
    // client's socket; an option a socket refused, logged (throttled).
    void set_client_controls(Connection& conn);
    void socket_control_failed(Connection& conn, Side side, std::string_view what,
                               int error) override;

    // connection_records.cpp: what the observer sees (observer.hpp).
    void notify_open(Connection& conn);
    ConnectionInfo info_of(const Connection& conn) const;
    void report_close(const Connection& conn);
    void count_closed(const Connection& conn, ShardCounters& counters);
    // direct_sockets.cpp: submits the close of every slot the connection holds (with
    // SO_LINGER {1, 0} first when `reset`); returns whether any was, so the caller
    // waits for them.
    bool close_slots(Connection& conn, bool reset);
    // The plain fd installed for a finished direction's destination slot: shut it for
    // writing and close it (the slot keeps the socket).
    void on_half_close(Connection& conn, Side side, int result);
    // preamble.cpp: puts the route's (or member's) PROXY header before the preamble.
    void add_proxy_header(Connection& conn);
    void send_preamble(Connection& conn);
    void on_preamble_sent(Connection& conn, int result);
    void handle(Connection& conn, Side side, const Outcome& outcome);
    void finalize(Connection& conn);
    // connection_handover.cpp
    // After every batch while connections are leaving (a hand-over, moves): pauses the
    // quiet ones; gives up moves past their time.
    void pause_leaving_connections();
    // Marks a forwarding connection as leaving and pauses it if it is quiet.
    void pause_if_quiet(Connection& conn);
    // A hold that has not led to the pause while nothing moved for kHoldLimit lets go.
    void let_go_of_a_long_hold(Connection& conn);
    bool quiet(const Connection& conn) const;
    void pause(Connection& conn);
    void call_off_pause(Connection& conn);
    // Copy directions held for a pause that will not come read again.
    void resume_held(Connection& conn);
    std::string start_move(Connection& conn, int to, std::chrono::milliseconds limit,
                           const CurrentRoute& current);
    // A completion of a connection being paused: true when it is the pause's own (a
    // cancelled read, a cancel, an fd installed); false when the data path must see it
    // (it moved after all: the pause is called off).
    bool on_handover_completion(Connection& conn, const OpTag& tag, const uring::Completion& c);
    // Once nothing is in flight: the next step (install fds for slots, or detach).
    void advance_handover(Connection& conn);
    // Calls the pause off: its directions read again.
    void resume_paused(Connection& conn);
    void detach(Connection& conn);
    // The address the connection was forwarded to. A member's or the selector's address
    // is the one connected to, known already: no getpeername(2) per connection for
    // observers or the control socket.
    static Endpoint upstream_endpoint(const Connection& conn);
    // A pause that cannot go on yet (no pipe, no fd): the connection reads and writes
    // again, and is paused again after `retry`.
    void call_off_for_now(Connection& conn, std::chrono::milliseconds retry);
    // An adopted connection takes on what it had done in the engine it came from.
    void resume(Connection& conn, Resumed& from); // takes its pipes
    // With direct descriptors, an adopted pair's plain fds go into slots before it
    // forwards, as an accepted one's sockets are: the fd limit then bounds only the
    // ones on their way in, not every connection adopted.
    void move_into_slots(Connection& conn);
    void on_moved_into_slots(Connection& conn, int result);
    // connection_control.cpp
    static bool matches(const Connection& conn, std::string_view route, std::string_view member);
    std::string upstream_text(const Connection& conn) const;

    ShardContext& shard_;
    Room room_;
    Moved moved_;
    Directions directions_;
    ConnectionTable table_;
    UpstreamConnector connector_; // after table_: it holds a reference to it
    Inspection inspection_;
    SourceGate gate_;     // allow/deny and per-source limits, before the upstream is chosen
    uint64_t opened_ = 0; // connections opened: the low bits of their ids
    DetachedQueue* detached_ = nullptr; // set while the engine hands its connections over
    bool handover_takes_pipes_ = false; // UnsentBytes::GoAlong
    std::size_t pausing_ = 0;           // connections Pausing or Installing
    // Connections asked to move to another shard, until they have gone or given up.
    struct PendingMove {
        uint32_t slot;
        uint32_t generation;
    };
    std::vector<PendingMove> moves_;
    bool moves_off_ = false; // stop_moves()
    LogThrottle table_full_log_;
    LogThrottle socket_control_log_;
};

} // namespace uringfwd::engine
