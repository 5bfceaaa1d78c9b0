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
#include "uringfwd/numa_topology.hpp"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <thread>
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

    bool stopped() const;

    EngineStats stats() const;

    // inherited.cpp
    std::vector<int> listener_fds() const;
    void release_listeners();
    void rearm_listeners();

    // reconfigure.cpp
    ReloadResult reconfigure(EngineConfig next);
    ReloadResult update_pool(std::string_view route, UpstreamPool pool);

    // handoff.cpp
    std::error_code hand_over(int client_fd, int upstream_fd, std::string_view route,
                              std::span<const std::byte> already_read);

private:
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
    // reconfigure.cpp
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
    // The configuration being served: config_ with the routes of the last reconfigure().
    EngineConfig current_;
    // Looks pool host names up again; declared last, so it stops before the rest goes.
    std::unique_ptr<engine::NameRefresher> names_;
    // Guards routes_ and listeners_ once running: reconfigure() changes them while
    // other threads may read them (listen_endpoints(), describe()).
    mutable std::mutex plan_mu_;
};

} // namespace uringfwd
