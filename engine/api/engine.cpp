#include "api/engine_impl.hpp"

#include "net/inherited_match.hpp"

#include "net/socket_address.hpp"
#include "platform/cpu_affinity.hpp"
#include "platform/shard_plan.hpp"
#include "routing/route_table.hpp"
#include "shard/shard.hpp"
#include "support/logger.hpp"
#include "support/plural.hpp"
#include "uringfwd/cpu_list.hpp"
#include "uringfwd/numa_topology.hpp"

#include <signal.h>
#include <unistd.h>

#include <dirent.h>

#include <fstream>
#include <future>
#include <map>
#include <thread>
#include <vector>

#include <fmt/format.h>

namespace uringfwd {

Engine::Impl::~Impl() {
    set_handover(false, UnsentBytes::StayHere); // a stopping shard does not end while one is on
    stop(std::chrono::milliseconds{0});
    wait();
}

void Engine::Impl::launch() {
    if (const std::vector<std::string> problems = validate(config_); !problems.empty()) {
        std::string message;
        for (const std::string& problem : problems)
            message += (message.empty() ? "" : "; ") + problem;
        throw StartError(message);
    }
    std::vector<int> cpus;
    try {
        cpus = engine::choose_shard_cpus(engine::allowed_cpus(), config_.placement.cpus,
                                         config_.placement.shards);
        auto table = engine::build_route_table(config_, cpus.size());
        engine::start_health_checks(*table, log_, health_watch());
        routes_ = table;
        current_ = config_;
        names_ = std::make_unique<engine::NameRefresher>([this] { refresh_names(); },
                                                         log_.with_prefix("resolve"));
        names_->follow(routes_);
    } catch (const std::exception& e) {
        throw StartError(e.what());
    }
    try {
        topology_ = read_numa_topology();
    } catch (const std::exception& e) {
        log_.debug("no NUMA topology ({}): treating the machine as one node", e.what());
    }
    // Every shard listens on every address of every route, in this order; routes that
    // share an address share its listener.
    for (std::size_t g = 0; g < routes_->groups.size(); ++g)
        listeners_.push_back({static_cast<uint32_t>(routes_->groups[g].anchor),
                              routes_->groups[g].address, false, static_cast<uint32_t>(g),
                              routes_->groups[g].options});
    try {
        adopt_inherited(cpus.size());
    } catch (const std::exception& e) {
        throw StartError(e.what());
    }

    std::optional<int>& steering_base = steering_base_;
    if (config_.placement.steer_by_cpu && cpus.size() > 1) {
        steering_base = engine::consecutive_base(cpus);
        if (!steering_base)
            log_.info("shard CPUs {} are not consecutive: connections are steered by "
                      "SO_INCOMING_CPU and the kernel's reuseport hash only",
                      format_cpu_list(cpus));
    }
    try {
        doorbells_ = std::make_shared<engine::ShardDoorbells>(cpus.size());
    } catch (const std::exception& e) {
        throw StartError(e.what());
    }
    plan_fd_room(cpus.size());
    for (std::size_t i = 0; i < cpus.size(); ++i) {
        engine::ShardSetup setup;
        setup.index = static_cast<int>(i);
        setup.shards = cpus.size();
        setup.doorbells = doorbells_;
        setup.fd_connections = fd_connections_;
        setup.detached = detached_;
        // Called on a shard's thread once launch() has made every shard (shards_ does
        // not change after), for a connection moving between shards.
        setup.move_to = [this](int to, engine::Handoff& handoff) {
            return to >= 0 && static_cast<std::size_t>(to) < shards_.size() &&
                   shards_[static_cast<std::size_t>(to)]->hand_over(handoff);
        };
        setup.max_pipes = room_.pipes_per_shard;
        setup.config = &config_;
        setup.routes = routes_;
        setup.cpu = cpus[i];
        setup.worker_cpus = worker_cpus(cpus[i]);
        for (std::size_t l = 0; l < listeners_.size(); ++l)
            setup.listeners.push_back(listener_setup(i, l, cpus[i], steering_base));
        launch_shard(std::move(setup));
        if (i == 0) { // port 0 is resolved by the first bind; the others join that port
            for (std::size_t l = 0; l < listeners_.size(); ++l)
                listeners_[l].address = shards_[0]->bound_address(l);
            room_.direct = shards_[0]->direct();
            room_.connections_per_shard = shards_[0]->slot_room();
        }
    }
    shards_made_.store(true, std::memory_order_release);
    warn_about_fd_room();
    start_rebalancer();
}

engine::ListenerSetup Engine::Impl::listener_setup(std::size_t shard, std::size_t l, int cpu,
                                                   std::optional<int> steering_base) const {
    engine::ListenerSetup setup;
    setup.index = static_cast<uint32_t>(l);
    setup.route = listeners_[l].route;
    setup.group = listeners_[l].group;
    setup.address = listeners_[l].address;
    setup.options = listeners_[l].options;
    setup.cpu = cpu;
    bool tcp = setup.address.family() != AF_UNIX;
    setup.set_incoming_cpu = config_.placement.steer_by_cpu && tcp;
    if (l < inherited_.size() && !inherited_[l].empty()) {
        // Adopted, not bound (docs/service.md). One socket for every shard has no
        // group to steer within; one per shard keeps the group's steering program,
        // which is attached again in case the group never had one.
        const std::vector<int>& fds = inherited_[l];
        setup.shared_fd = engine::inherited_for_shard(fds, shard, shard_count_,
                                                      engine::to_endpoint(setup.address));
        if (fds.size() == 1) {
            setup.set_incoming_cpu = false;
            setup.steering_base.reset();
        } else if (shard == 0 && tcp) {
            setup.steering_base = steering_base;
        }
        return setup;
    }
    if (shard == 0 && tcp)
        setup.steering_base = steering_base;
    else if (shard > 0 && !tcp)
        setup.shared_fd = shards_[0]->listener_fd(l);
    return setup;
}

Endpoint Engine::Impl::listen_endpoint() const {
    std::lock_guard lock(plan_mu_);
    for (const PlannedListener& l : listeners_)
        if (!l.closed)
            return engine::to_endpoint(l.address);
    return {};
}

std::vector<Endpoint> Engine::Impl::listen_endpoints(std::string_view route) const {
    std::lock_guard lock(plan_mu_);
    std::vector<Endpoint> out;
    for (const PlannedListener& l : listeners_)
        if (!l.closed && serves(l, route))
            out.push_back(engine::to_endpoint(l.address));
    return out;
}

bool Engine::Impl::serves(const PlannedListener& l, std::string_view route) const {
    for (std::size_t r : routes_->groups[l.group].routes)
        if (routes_->routes[r].name == route)
            return true;
    return false;
}

EngineInfo Engine::Impl::info() const {
    EngineInfo out;
    {
        std::lock_guard lock(plan_mu_);
        out.routes = route_infos();
    }
    for (const auto& shard : shards_) {
        ShardInfo s = shard->info();
        s.node = topology_.node_of_cpu(shard->cpu());
        out.shards.push_back(std::move(s));
    }
    out.room = room_;
    return out;
}

std::string Engine::Impl::describe() const {
    const EngineInfo engine_info = info();
    std::string out = describe_serving(engine_info);
    for (std::size_t i = 0; i < engine_info.shards.size(); ++i)
        out += fmt::format("; shard {}: {}", i, uringfwd::describe(engine_info.shards[i]));
    return out;
}

std::vector<RouteInfo> Engine::Impl::route_infos() const {
    std::vector<RouteInfo> out;
    for (const engine::Route& route : routes_->routes) {
        RouteInfo r;
        r.name = route.name;
        r.balance = route.pool.balance;
        for (const PlannedListener& l : listeners_)
            if (!l.closed && serves(l, route.name))
                r.listen.push_back(engine::to_endpoint(l.address));
        for (const engine::MemberRoute& m : route.members)
            r.members.push_back(m.name);
        out.push_back(std::move(r));
    }
    return out;
}

void Engine::Impl::stop(std::optional<std::chrono::milliseconds> drain) {
    stopping_.store(true);
    if (rebalancer_)
        rebalancer_->stop(); // joined in wait()
    for (auto& shard : shards_)
        shard->request_stop(drain.value_or(config_.drain_timeout));
}

void Engine::Impl::wait() {
    for (std::thread& t : threads_)
        if (t.joinable())
            t.join();
    // stop() has told it to stop; its rebalance() calls into shards that have ended
    // find them ended (Shard::call). The object stays (a stop() may still read it).
    if (rebalancer_)
        rebalancer_->join();
    // Before plan_mu_ is taken: a refresh in progress takes it too.
    if (names_)
        names_->stop();
    std::lock_guard lock(plan_mu_);
    if (routes_ && routes_->health)
        routes_->health->stop();
}

std::vector<ShardStats> Engine::Impl::shard_stats() const {
    std::map<int, uint64_t> workers = count_iowq_workers();
    std::vector<ShardStats> out;
    for (std::size_t i = 0; i < shards_.size(); ++i) {
        ShardStats s;
        s.shard = static_cast<int>(i);
        s.cpu = shards_[i]->cpu();
        s.node = topology_.node_of_cpu(s.cpu);
        shards_[i]->counters().add_to(s.counters);
        s.connect_time = shards_[i]->counters().connect_time.snapshot();
        s.duration = shards_[i]->counters().duration.snapshot();
        s.counters.iowq_threads =
            workers[shards_[i]->counters().thread_id.load(std::memory_order_relaxed)];
        out.push_back(s);
    }
    return out;
}

bool Engine::Impl::stopped() const {
    for (const auto& shard : shards_)
        if (!shard->finished())
            return false;
    return true;
}

EngineStats Engine::Impl::stats() const {
    EngineStats total;
    for (const ShardStats& s : shard_stats())
        total += s.counters;
    return total;
}

void Engine::Impl::launch_shard(engine::ShardSetup setup) {
    auto shard = std::make_unique<engine::Shard>(
        setup, log_.with_prefix(fmt::format("shard {}", setup.index)));
    std::promise<void> ready;
    std::future<void> started = ready.get_future();
    engine::Shard* raw = shard.get();
    shards_.push_back(std::move(shard));
    threads_.emplace_back([raw, promise = std::move(ready)]() mutable {
        // An inline splice(2) into a socket whose peer has gone raises SIGPIPE in the
        // calling thread: splice_to_socket() sends without MSG_NOSIGNAL (fs/splice.c;
        // the ring's splices ran on io-wq workers, which take no signals). Blocked on the
        // shard's thread, the signal stays pending there and the splice returns EPIPE,
        // so an embedder's process is not killed by a client that went away.
        sigset_t pipe_signal;
        sigemptyset(&pipe_signal);
        sigaddset(&pipe_signal, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
        raw->run(promise);
    });
    try {
        started.get();
    } catch (const std::exception& e) {
        threads_.back().join();
        stop(std::chrono::milliseconds{0}); // shards already running
        wait();
        throw StartError(e.what());
    }
}

std::map<int, uint64_t> Engine::Impl::count_iowq_workers() {
    std::map<int, uint64_t> counts;
    DIR* dir = ::opendir("/proc/self/task");
    if (dir == nullptr)
        return counts;
    while (dirent* entry = ::readdir(dir)) {
        if (entry->d_name[0] == '.')
            continue;
        std::ifstream comm(fmt::format("/proc/self/task/{}/comm", entry->d_name));
        std::string name;
        if (std::getline(comm, name) && name.rfind("iou-wrk-", 0) == 0)
            ++counts[std::atoi(name.c_str() + 8)];
    }
    ::closedir(dir);
    return counts;
}

std::vector<int> Engine::Impl::worker_cpus(int shard_cpu) const {
    if (config_.placement.worker_placement == WorkerPlacement::ShardNode) {
        int node = topology_.node_of_cpu(shard_cpu);
        if (node >= 0)
            return topology_.node_cpus[static_cast<std::size_t>(node)];
    }
    return {shard_cpu};
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

std::unique_ptr<Engine> Engine::start(EngineConfig config) {
    auto impl = std::make_unique<Impl>(std::move(config));
    impl->launch();
    return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

Endpoint Engine::listen_endpoint() const {
    return impl_->listen_endpoint();
}
std::vector<Endpoint> Engine::listen_endpoints(std::string_view route) const {
    return impl_->listen_endpoints(route);
}
EngineInfo Engine::info() const {
    return impl_->info();
}

std::string Engine::describe() const {
    return impl_->describe();
}
ConnectionRoom Engine::connection_room() const {
    return impl_->connection_room();
}
void Engine::stop(std::optional<std::chrono::milliseconds> drain) {
    impl_->stop(drain);
}
void Engine::wait() {
    impl_->wait();
}
bool Engine::stopped() const {
    return impl_->stopped();
}
EngineStats Engine::stats() const {
    return impl_->stats();
}
std::vector<ShardStats> Engine::shard_stats() const {
    return impl_->shard_stats();
}
std::vector<RouteStats> Engine::route_stats() const {
    return impl_->route_stats();
}
SourceTableStats Engine::source_table_stats() const {
    return impl_->source_table_stats();
}
std::vector<int> Engine::listener_fds() const {
    return impl_->listener_fds();
}
void Engine::release_listeners() {
    impl_->release_listeners();
}
void Engine::rearm_listeners() {
    impl_->rearm_listeners();
}
std::vector<MemberHealth> Engine::member_health() const {
    return impl_->member_health();
}
std::error_code Engine::forward(int client_fd, std::string_view route,
                                std::span<const std::byte> already_read) {
    return impl_->hand_over(client_fd, -1, route, already_read);
}
std::error_code Engine::forward_pair(int client_fd, int upstream_fd, std::string_view route) {
    return impl_->hand_over(client_fd, upstream_fd, route, {});
}
ReloadResult Engine::update_pool(std::string_view route, UpstreamPool pool) {
    return impl_->update_pool(route, std::move(pool));
}
ReloadResult Engine::reconfigure(EngineConfig config) {
    return impl_->reconfigure(std::move(config));
}
ChangeResult Engine::set_member_state(std::string_view route, std::string_view member,
                                      MemberState state) {
    return impl_->set_member_state(route, member, state);
}
ChangeResult Engine::set_member_weight(std::string_view route, std::string_view member,
                                       unsigned weight) {
    return impl_->set_member_weight(route, member, weight);
}
ChangeResult Engine::add_member(std::string_view route, UpstreamMember member) {
    return impl_->add_member(route, std::move(member));
}
ChangeResult Engine::remove_member(std::string_view route, std::string_view member) {
    return impl_->remove_member(route, member);
}
std::vector<MemberInfo> Engine::members(std::string_view route) const {
    return impl_->members(route);
}
std::vector<OpenConnection> Engine::connections(const ConnectionFilter& filter) const {
    return impl_->connections(filter);
}
ChangeResult Engine::close_connection(uint64_t id) {
    return impl_->close_connection(id);
}
std::size_t Engine::close_connections(std::string_view route, std::string_view member) {
    return impl_->close_connections(route, member);
}

} // namespace uringfwd
