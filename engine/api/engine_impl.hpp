// The engine behind the public Engine: its shards and their threads, the routes they
// serve and the listeners every shard holds. engine.cpp starts, describes, counts and
// stops it; reconfigure.cpp changes its routes while it runs.
#pragma once

#include "uringfwd/engine.hpp"

#include "net/socket_address.hpp"
#include "routing/name_refresher.hpp"
#include "routing/route_table.hpp"
#include "shard/shard.hpp"
#include "support/logger.hpp"
#include "support/periodic_thread.hpp"
#include "uringfwd/numa_topology.hpp"

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace uringfwd {

class Engine::Impl {
public:
    explicit Impl(EngineConfig config)
        : config_(std::move(config)), log_(config_.log_level, config_.log_sink, "engine") {}

    ~Impl();

    void launch();

    // Listener `l` of shard `shard`: TCP listeners form one SO_REUSEPORT group per
    // address, whose first member (shard 0's) carries the steering program; Unix
    // sockets have no SO_REUSEPORT, so later shards accept on a dup of shard 0's.
    engine::ListenerSetup listener_setup(std::size_t shard, std::size_t l, int cpu,
                                         std::optional<int> steering_base) const;

    Endpoint listen_endpoint() const;

    std::vector<Endpoint> listen_endpoints(std::string_view route) const;

    EngineInfo info() const;
    std::string describe() const;
    ConnectionRoom connection_room() const { return room_; }
    // The routes as served, for info(); plan_mu_ held.
    std::vector<RouteInfo> route_infos() const;

    void stop(std::optional<std::chrono::milliseconds> drain);

    void wait();

    std::vector<ShardStats> shard_stats() const;
    std::vector<MemberHealth> member_health() const;
    std::vector<RouteStats> route_stats() const;
    SourceTableStats source_table_stats() const;

    bool stopped() const;

    EngineStats stats() const;

    // inherited.cpp
    std::vector<int> listener_fds() const;
    void release_listeners();
    void rearm_listeners();

    // reconfigure.cpp
    ReloadResult reconfigure(EngineConfig next);
    ReloadResult update_pool(std::string_view route, UpstreamPool pool);

    // member_control.cpp: runtime control of pool members (uringfwd/runtime.hpp).
    ChangeResult set_member_state(std::string_view route, std::string_view member,
                                  MemberState state);
    ChangeResult set_member_weight(std::string_view route, std::string_view member,
                                   unsigned weight);
    ChangeResult add_member(std::string_view route, UpstreamMember member);
    ChangeResult remove_member(std::string_view route, std::string_view member);
    std::vector<MemberInfo> members(std::string_view route) const;
    // connection_control.cpp
    std::vector<OpenConnection> connections(const ConnectionFilter& filter) const;
    ChangeResult close_connection(uint64_t id);
    std::size_t close_connections(std::string_view route, std::string_view member);
    // connection_moves.cpp
    ChangeResult move_connection(uint64_t id, unsigned to, std::chrono::milliseconds limit);
    std::size_t rebalance();
    // Plans on each shard's connections not moving already; rebalances when
    // worth_it(those, moves under way) says so.
    std::size_t
    rebalance_if(const std::function<bool(const std::vector<std::size_t>&, std::size_t)>& worth_it);
    // rebalance_above: starts the thread that rebalances when the shards drift apart.
    void start_rebalancer();

    // handoff.cpp
    std::error_code hand_over(int client_fd, int upstream_fd, std::string_view route,
                              std::span<const std::byte> already_read);

    // handover.cpp: an upgrade's connection hand-over (docs/handover.md).
    void set_handover(bool on, UnsentBytes unsent);
    HandoverEnd end_handover();
    std::vector<DetachedConnection> take_detached(std::size_t max, std::chrono::milliseconds wait);
    std::error_code adopt(DetachedConnection&& conn);
    std::size_t open_connections() const;

private:
    // handoff.cpp, for hand_over() and adopt(): whether a route of the current table has
    // this name (plan_mu_ taken here); and `handoff` queued on the shard pinned to `cpu`,
    // else the one with fewest open: operation_canceled, with the fds left to the
    // caller, when that shard has ended.
    bool serves_route(std::string_view route) const;
    std::error_code deliver(engine::Handoff& handoff, int cpu);
    void launch_shard(engine::ShardSetup setup);
    // fd_budget.cpp: works out room_ and fd_connections_ (throws StartError when there
    // is no room at all); warns when the room is small.
    void plan_fd_room(std::size_t shards);
    void warn_about_fd_room();

    // The io-wq workers of the ring(s) a thread submits to are named
    // "iou-wrk-<submitter tid>" (io_uring/io-wq.c create_io_worker).
    static std::map<int, uint64_t> count_iowq_workers();

    // Which CPUs a shard's io-wq workers may use.
    std::vector<int> worker_cpus(int shard_cpu) const;

    // inherited.cpp: matches config_.inherited.inherited_listeners to listeners_ (inherited_);
    // throws std::runtime_error for a socket that cannot be used.
    void adopt_inherited(std::size_t shards);

    struct PlannedListener {
        uint32_t route;                      // its group's anchor route
        engine::SocketAddress address;       // bound (port resolved) once shard 0 started
        bool closed = false;                 // removed by a reconfiguration
        uint32_t group = 0;                  // in routes_->groups
        engine::ListenSocketOptions options; // how its socket was set up when bound
    };
    // Whether `l` takes clients of the route named `route` (alone or in a group).
    bool serves(const PlannedListener& l, std::string_view route) const;
    // reconfigure.cpp; plan_mu_ held.
    ReloadResult reconfigure_locked(EngineConfig next);
    // member_control.cpp. A state or weight set at runtime, per route and member name:
    // kept across reloads while the member is in the configuration.
    struct RuntimeSetting {
        std::optional<MemberState> state;
        std::optional<unsigned> weight;
        // The configuration's weight when `weight` was set: a reload that changes it
        // there wins over `weight` (as HAProxy's server-state file does it).
        unsigned configured_weight = 1;
        bool empty() const { return !state && !weight; }
    };
    using MemberKey = std::pair<std::string, std::string>; // route, member name
    // Gives `table`'s members what was set for them at runtime, before its shards and
    // its health checks start; plan_mu_ held.
    void keep_runtime_settings(engine::RouteTable& table) const;
    // Once routes_ is the new table: drops what is set for members it has no more, and
    // weights its configuration changed.
    void prune_runtime_settings();
    // Where `member` (a key, else an address, see Engine::set_member_state()) is in
    // routes_: the route's and the member's index, or an error for an operator.
    struct MemberPlace {
        std::size_t route = 0;
        std::size_t member = 0;
        std::string error;
    };
    MemberPlace find_member(std::string_view route, std::string_view member) const;
    // The configuration being served, for a change of one pool (update_pool(),
    // add_member(), remove_member()): current_ with its routes spelled out (the
    // single-route shorthand too) and every listen address given with port 0 pinned to
    // the port it got, so that changing a pool does not move its route to a new port.
    // plan_mu_ held.
    EngineConfig served_config() const;
    // A change of one member set at runtime: finds `member` of `route` (plan_mu_ taken
    // here), lets `record` note it in runtime_ (and do what it must off the shards),
    // runs `apply(shard, route name, member index)` on every shard and logs `done`.
    using MemberChange = std::function<void(const engine::Route&, std::size_t, RuntimeSetting&)>;
    using ShardChangeOf = std::function<void(engine::Shard&, const std::string&, std::size_t)>;
    ChangeResult change_member(std::string_view route, std::string_view member,
                               const MemberChange& record, const ShardChangeOf& apply,
                               const std::string& done);
    // Runs `task(shard)` on every shard in turn: false when one has ended.
    bool on_every_shard(const std::function<void(engine::Shard&)>& task) const;
    // What the health checkers call on a change: shards reset the connections of
    // members gone down (on_member_down = Close).
    engine::HealthChecker::OnChange health_watch();
    std::vector<std::string> needs_restart(const EngineConfig& next) const;
    std::string apply_to_shards(const engine::RouteTable& next,
                                std::shared_ptr<const engine::RouteTable> table);
    // The pools' host names resolve to other addresses now: serve the same routes anew.
    void refresh_names();

    EngineConfig config_;
    engine::Logger log_;
    NumaTopology topology_;
    // Every shard's wake-up eventfd, made before the first shard starts.
    std::shared_ptr<const engine::ShardDoorbells> doorbells_;
    ConnectionRoom room_;
    // The connections on plain fds room_ allows, counted by every shard.
    std::shared_ptr<engine::SharedLimit> fd_connections_;
    std::vector<std::unique_ptr<engine::Shard>> shards_;
    std::vector<std::thread> threads_;
    std::shared_ptr<const engine::RouteTable> routes_;
    std::vector<PlannedListener> listeners_;
    // Per listener of the start (listeners_' first entries): the inherited sockets
    // bound to its address, one or one per shard; empty: bound by the shards.
    std::vector<std::vector<int>> inherited_;
    // release_listeners() was called: the sockets are someone else's now.
    bool released_ = false;
    std::size_t shard_count_ = 0;       // shards the engine starts with
    std::optional<int> steering_base_;  // CPU steering of TCP listeners (see launch())
    std::atomic<bool> stopping_{false}; // stop() was called: hand-overs are refused
    // launch() has made every shard: shards_ no longer changes (health_watch() reads it
    // from the checker's thread).
    std::atomic<bool> shards_made_{false};
    std::map<MemberKey, RuntimeSetting> runtime_; // plan_mu_
    // The configuration being served: config_ with the routes of the last reconfigure().
    EngineConfig current_;
    // Connections detached for an upgrade's hand-over, on their way to take_detached().
    std::shared_ptr<engine::DetachedQueue> detached_ = std::make_shared<engine::DetachedQueue>();
    // rebalance_above: evens the shards out once a second (connection_moves.cpp).
    std::unique_ptr<engine::PeriodicThread> rebalancer_;
    // Looks pool host names up again; declared last, so it stops before the rest goes.
    std::unique_ptr<engine::NameRefresher> names_;
    // Guards routes_ and listeners_ once running: reconfigure() changes them while
    // other threads may read them (listen_endpoints(), describe()).
    mutable std::mutex plan_mu_;
};

} // namespace uringfwd
