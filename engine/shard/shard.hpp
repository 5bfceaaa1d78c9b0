// A shard: one thread, one io_uring, its listeners, connections, pipes and copy
// buffers. This class is the loop and the dispatch; the owners it dispatches to live
// in their own files (listener, connections, directions, shard_io). Nothing in a
// shard is touched by another thread except its counters (atomics the shard alone
// writes) and its wake-up eventfd.
#pragma once

#include "net/socket_address.hpp"
#include "pipes/pipe_pool.hpp"
#include "shard/connection/connections.hpp"
#include "shard/handover/detached_queue.hpp"
#include "shard/listener.hpp"
#include "shard/loop/mailbox.hpp"
#include "shard/loop/shard_context.hpp"
#include "shard/loop/shard_counters.hpp"
#include "shard/loop/shard_doorbells.hpp"
#include "shard/loop/shard_io.hpp"
#include "shard/shard_route.hpp"
#include "shard/unserved_socket.hpp"
#include "support/log_throttle.hpp"
#include "support/logger.hpp"
#include "uring/provided_buffers.hpp"
#include "uring/unique_fd.hpp"
#include "uringfwd/config.hpp"
#include "uringfwd/engine.hpp"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace uringfwd::engine {

struct Handoff;

struct ShardSetup {
    int index = 0;
    std::size_t shards = 1; // in the engine
    // Every shard's wake-up eventfd (this one's is doorbells->fd(index)); never null.
    std::shared_ptr<const ShardDoorbells> doorbells;
    // The connections on plain fds the fd limit leaves room for, all shards together
    // (platform/fd_room.hpp); never null.
    std::shared_ptr<SharedLimit> fd_connections;
    std::size_t max_pipes = 128; // per shard: the configured value, or fewer for the fds
    const EngineConfig* config = nullptr;
    std::shared_ptr<const RouteTable> routes;
    std::vector<ListenerSetup> listeners; // listener i has index i
    int cpu = -1;                         // pin to this CPU (-1: don't pin)
    std::vector<int> worker_cpus;         // io-wq affinity (empty: leave as is)
    // Where its connections go while the engine hands them over (never null).
    std::shared_ptr<DetachedQueue> detached;
    // Queues a connection moving between shards for shard `to` (its hand_over()): false
    // when that shard has ended (the engine stops). Called on this shard's thread.
    std::function<bool(int to, Handoff&)> move_to;
};

// A new configuration for a running shard (Engine::reconfigure).
struct ShardChange {
    std::shared_ptr<const RouteTable> routes;
    // Per listener the shard has: the route it serves from now on, or -1 to close it,
    // and its listen group in `routes`.
    std::vector<int> listener_routes;
    std::vector<uint32_t> listener_groups;
    // Listeners to add; their indexes follow the existing ones.
    std::vector<ListenerSetup> new_listeners;
};

// A connection the application hands over (Engine::forward, forward_pair). It owns
// its sockets: one dropped before its shard takes it (the route went away, the shard
// stopped) is reset and closed (UnservedSocket).
struct Handoff {
    UnservedSocket client{};
    UnservedSocket upstream{}; // forward_pair: connected by the application
    std::string route{};
    std::vector<std::byte> preamble{}; // read from the client before the hand-over
    // Engine::adopt: a connection another engine detached (an upgrade's hand-over),
    // with its upstream; taken even while the shard drains.
    std::optional<Resumed> resumed{};
};

class Shard {
public:
    Shard(ShardSetup setup, Logger logger);
    ~Shard();

    // The thread body: sets up the ring, pipe pool and listener, reports success or
    // the failure through `ready`, then serves until stopped.
    void run(std::promise<void>& ready);

    // Thread-safe: wakes the shard and makes it stop accepting; connections left after
    // `drain` are reset. A later call keeps the first deadline, unless its drain is 0:
    // then everything is reset at once.
    void request_stop(std::chrono::milliseconds drain);

    // Thread-safe: the shard applies `change` between two batches of completions and
    // this returns then: empty, or why it could not (a new listener could not bind,
    // the shard is stopping), in which case nothing changed. New connections use the
    // new routes at once; open ones keep their route and member until they end.
    std::string apply_change(ShardChange change);

    // Thread-safe: queues a connection for this shard, which owns its sockets from then
    // on (taken from `handoff`); one taken while the shard is stopping is reset. False,
    // with `handoff` left as it was, once the shard has ended.
    bool hand_over(Handoff& handoff);
    // On the shard's thread only (through post()): an upgrade's connection hand-over
    // starts (every quiet connection is detached into ShardSetup::detached) or ends.
    // While it is on, a stopping shard does not end (a detached connection the
    // successor refuses comes back).
    void set_handover(bool on, UnsentBytes unsent);
    // On the shard's thread only (through call()): moves between shards
    // (Engine::move_connection, rebalance; shard_moves.cpp). The connection with this
    // id moves to shard `to` once it is quiet, or gives up after `limit`: nothing when
    // this shard has none with
    // the id, else empty or why it cannot.
    std::optional<std::string> request_move(uint64_t id, int to, std::chrono::milliseconds limit);
    // Up to `count` of its forwarding connections move to shard `to`: how many will.
    std::size_t request_moves(std::size_t count, int to);
    // On the shard's thread: its open connections not asked to move yet, and those
    // that are.
    std::size_t staying() const { return connections_->active() - connections_->pending_moves(); }
    std::size_t leaving() const { return connections_->pending_moves(); }

    // On the shard's thread only: while held, a stopping shard with no connection left
    // does not end either (Engine::end_handover brings detached ones back to it).
    void hold_open(bool hold) { held_open_ = hold; }

    // Thread-safe: runs `task` on the shard's thread between two batches of completions
    // and returns once it has run; false, without running it, once the shard has ended.
    bool call(const std::function<void()>& task);
    // Thread-safe: the same without waiting for it (false once the shard has ended).
    bool post(std::function<void()> task);
    // On the shard's thread only (through call()): adds this shard's counts to `out`,
    // one entry per route of the current configuration, matched by name, then the
    // routes and members a reconfigure removed, while connections drain on them. A
    // listening socket's accept queue (clients waiting in the backlog) is counted by the
    // first shard that holds it: `queues_counted` names those counted so far (inodes).
    void add_route_stats(std::vector<RouteStats>& out, std::set<uint64_t>& queues_counted) const;
    // On the shard's thread only (through call()): every listener stops accepting
    // without shutting its socket down (Listener::release()).
    void release_listeners();
    // On the shard's thread only: true once no listener has an operation in flight (a
    // released listener's cancelled accept has come back).
    bool listeners_idle() const;
    // On the shard's thread only: every listener's accept is armed anew
    // (Listener::rearm()).
    void rearm_listeners();

    // shard_control.cpp: runtime control (uringfwd/runtime.hpp), on the shard's thread
    // only (through call()). Member `member` of the current route named `route` (the
    // engine's table, the same on every shard): false when there is none.
    bool set_member_state(std::string_view route, std::size_t member, MemberState state);
    bool set_member_weight(std::string_view route, std::size_t member, unsigned weight);
    // Adds this shard's counts to the entries of `out` (matched by route and member
    // name): open connections, connects and failures (of retired routes too, whose
    // connections drain), the largest effective weight, and Down where passive health
    // has a member without an active check marked down.
    void add_member_stats(std::vector<MemberInfo>& out) const;
    void add_connections(std::vector<OpenConnection>& out, const ConnectionFilter& filter,
                         std::size_t limit);
    // Resets it (CloseReason::Admin): false when this shard has no such open connection.
    bool close_connection(uint64_t id);
    std::size_t close_connections(std::string_view route, std::string_view member);
    // A health check changed its verdict on a member: routes with on_member_down =
    // Close reset the forwarding connections of their members that are down.
    void close_down_members();

    const ShardCounters& counters() const { return counters_; }
    // True once run() has returned (or never got past setup).
    bool finished() const { return finished_.load(std::memory_order_acquire); }
    // Valid once run() reported ready.
    SocketAddress bound_address(std::size_t listener) const { return bound_[listener]; }
    int listener_fd(std::size_t listener) const { return listener_fds_[listener]; }
    int cpu() const { return setup_.cpu; }
    // Valid once run() reported ready: direct descriptors in use, and the connections
    // its file table holds (shard_budget.cpp).
    bool direct() const { return direct_; }
    std::size_t slot_room() const { return slot_room_; }
    // Valid once run() reported ready; the engine fills in the node.
    const ShardInfo& info() const { return info_; }

private:
    void setup();
    void setup_ring();
    void setup_buffers();
    void serve();
    bool done_serving() const;
    void after_batch();
    void dispatch(const uring::Completion& c);
    void on_shard_op(const OpTag& tag, const uring::Completion& c);
    void on_listener_op(const OpTag& tag, const uring::Completion& c);
    // `fd_unit_taken`: its unit of the fd limit's connections was taken before the
    // accept (one at a time).
    void open_connection(Listener& listener, int client_fd, bool fd_unit_taken = false);
    // AcceptReady: clients wait in the listener's backlog; take as many as there is
    // room for, one accept(2) each.
    void accept_waiting(Listener& listener);
    void setup_direct_descriptors();
    // SpliceMechanism resolved for this shard: whether splicing directions go inline.
    bool choose_inline_splice() const;
    // A client of `route`: opened now, or queued while the route is at its limit.
    void admit(ShardRoute& route, WaitingClient client);
    // `counted`: it took a unit of the route's limit (SharedLimit::Taken::Counted).
    void open(ShardRoute& route, WaitingClient client, bool counted);
    void take_handoff(Handoff& handoff);
    // shard_moves.cpp: whether a route is one of this shard's current table; a
    // connection detached to move to shard `to` goes there.
    Connections::CurrentRoute current_route() const;
    void send_moved(DetachedConnection&& conn, Resumed::SameEngine&& same, int to);
    // A connection moved here (take_handoff): it was open all along, so it does not
    // wait at its route's limit; it brings the unit it held there. `route`: this
    // shard's of its name, null when a reload removed it meanwhile.
    void take_moved(Handoff& handoff, ShardRoute* route);
    // The socket budget's units of a connection handed over (shard_handoff.cpp).
    SocketUnits take_handoff_units(const Handoff& handoff);
    // The route has no room for another client: its listeners hold off accepting and
    // the shard waits for room at its limit.
    void hold(ShardRoute& route);
    // Room may have come at the route's limit (a connection closed, here or on another
    // shard): waiting clients go in first, then the listeners accept again.
    void resume(ShardRoute& route);
    // resume() for every route that is held or has clients waiting (after a wake-up:
    // another shard may have given room back).
    void resume_all();
    void on_room(ShardRoute& route);
    // shard_budget.cpp: the socket budget. Every client takes its units when accepted
    // or handed over; while the fd limit's or the file table's connections are all
    // taken, the listeners that would take more hold off (clients wait in the
    // backlog); near the fd limit's, plain listeners accept one client at a time.
    SocketUnits take_units(bool plain_fd, bool slot, bool fd_unit_taken = false);
    void give_units(SocketUnits units);
    void check_budget();
    void resume_budget();
    void update_accept_modes();
    // After setup or a change of listeners: the file table's room, the backlog sizes.
    void plan_budget();
    // This shard's state of route `index` of `table` (current or retired), or null.
    ShardRoute* shard_route_of(const RouteTable& table, std::size_t index);
    // Calls f for each listener of `route` (none once the route is retired).
    template <typename F> void for_listeners_of(const ShardRoute& route, F&& f) {
        for (auto& listener : listeners_)
            if (!listener->stopped() && routes_[listener->route()].get() == &route)
                f(*listener);
    }
    void arm_idle_sweep();
    void on_wake(int result);
    void wake();
    // shard_control.cpp
    ShardRoute* current_route(std::string_view name);
    // After a change: `old`'s route resets the forwarding connections of the members it
    // has no more, when its new version says on_member_down = Close.
    void close_removed_members(const ShardRoute& old);
    // shard_reload.cpp
    std::string apply(ShardChange& change);
    void prune_retired_routes();
    void add_route_stats(const ShardRoute& route, bool retired, std::vector<RouteStats>& out,
                         std::set<uint64_t>& queues_counted) const;
    void plan_idle_sweep();
    void stop_now();
    // A connection carried on while the shard drains (one a successor refused or never
    // took) ends at the drain's deadline, as the others do: its timer is armed again
    // for what is left of it, or, past it, the connection closes as DrainTimeout.
    void keep_drain_deadline();
    void begin_stop();
    void finish_when_idle();
    void log_pool_notices();

    ShardSetup setup_;
    const EngineConfig& config_;
    Logger log_;
    int wake_fd_; // setup_.doorbells': this shard's
    ShardCounters counters_;
    // The wake-up poll, the drain deadline, their cancels, and the closes of slots
    // nobody serves (slot_closer_). Before the routes, which go first and may hold such.
    InFlight in_flight_;
    // Made on the shard's thread in setup(), in this order; destroyed in reverse, so
    // the copy buffers are unregistered before their ring goes.
    std::unique_ptr<ShardIo> io_;
    std::unique_ptr<pipes::PipePool> pool_;
    std::unique_ptr<uring::ProvidedBuffers> buffers_;      // null: splice only
    std::unique_ptr<uring::ProvidedBuffers> bulk_buffers_; // null: none (only Copy has them)
    DataPath data_path_ = DataPath::Auto;                  // what the shard really does
    bool direct_ = false; // direct descriptors in use (setup_direct_descriptors())
    std::unique_ptr<ShardContext> context_;
    SlotCloser slot_closer_; // io_ and in_flight_, once io_ is made
    // Per route of setup_.routes, same order. Connections point at theirs, so routes
    // replaced by a change are kept (retired) until their last connection has gone.
    std::vector<std::unique_ptr<ShardRoute>> routes_;
    std::vector<std::unique_ptr<ShardRoute>> retired_routes_;
    // Per listen group of setup_.routes: the inspector of an address that routes share
    // (null where none), handed to each client its listener accepts.
    std::vector<std::shared_ptr<const Inspector>> group_inspectors_;
    void make_group_inspectors();
    std::unique_ptr<Connections> connections_;
    std::vector<std::unique_ptr<Listener>> listeners_;
    std::vector<SocketAddress> bound_; // per listener, for the engine
    std::vector<int> listener_fds_;
    ShardInfo info_; // what setup() got (info())
    // The socket budget (shard_budget.cpp).
    SharedLimit* fd_connections_ = nullptr; // setup_.fd_connections
    bool fds_held_ = false;                 // plain listeners hold: no fd room left
    bool wanting_fds_ = false;              // registered at fd_connections_
    std::size_t slot_room_ = 0;             // connections the file table holds; 0: none
    std::size_t slots_taken_ = 0;           // units of it taken
    bool slots_held_ = false;
    // Plain listeners accept one at a time while the fd limit's room left is below
    // this (connections): what their multishot accepts could take at once.
    std::size_t one_at_a_time_below_ = 0;
    LogThrottle budget_log_{1, std::chrono::seconds(10)};
    std::chrono::milliseconds idle_sweep_{0}; // 0: no route has an idle timeout
    bool idle_sweep_armed_ = false;
    bool leave_tick_armed_ = false; // Op::LeaveTick, while connections are leaving

    bool stopping_ = false;
    bool drain_timer_armed_ = false;
    // When the drain that began with the stop ends (epoch until then, or without one).
    std::chrono::steady_clock::time_point drain_deadline_{};
    bool final_cancels_sent_ = false;
    bool held_open_ = false; // hold_open()
    // Written by request_stop() on any thread before it writes the eventfd.
    std::atomic<int64_t> drain_ms_{0};
    std::atomic<bool> stop_requested_{false};
    std::atomic<bool> finished_{false};
    // Changes, calls and hand-overs from other threads, run when the eventfd fires;
    // closed when the shard ends (run(), or the destructor of one that never ran).
    Mailbox mailbox_{[this] { wake(); }};
};

} // namespace uringfwd::engine
