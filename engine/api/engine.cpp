#include "uringfwd/engine.hpp"

#include "net/socket_address.hpp"
#include "platform/cpu_affinity.hpp"
#include "platform/shard_plan.hpp"
#include "shard/shard.hpp"
#include "support/logger.hpp"
#include "uringfwd/cpu_list.hpp"
#include "uringfwd/numa_topology.hpp"

#include <sys/un.h>
#include <unistd.h>

#include <dirent.h>

#include <fstream>
#include <future>
#include <map>
#include <thread>
#include <vector>

#include <fmt/format.h>

namespace uringfwd {

class Engine::Impl {
public:
    explicit Impl(EngineConfig config)
        : config_(std::move(config)), log_(config_.log_level, config_.log_sink, "engine") {}

    ~Impl() {
        stop(std::chrono::milliseconds{0});
        wait();
    }

    void launch() {
        check_copy_buffers();
        engine::SocketAddress listen;
        engine::SocketAddress upstream;
        std::vector<int> cpus;
        try {
            listen = engine::resolve(config_.listen);
            upstream = engine::resolve(config_.upstream);
            cpus = engine::choose_shard_cpus(engine::allowed_cpus(), config_.cpus, config_.shards);
        } catch (const std::exception& e) {
            throw StartError(e.what());
        }
        try {
            topology_ = read_numa_topology();
        } catch (const std::exception& e) {
            log_.debug("no NUMA topology ({}): treating the machine as one node", e.what());
        }

        bool tcp = listen.family() != AF_UNIX;
        std::optional<int> steering_base;
        if (config_.steer_by_cpu && tcp && cpus.size() > 1) {
            steering_base = engine::consecutive_base(cpus);
            if (!steering_base)
                log_.info("shard CPUs {} are not consecutive: connections are steered by "
                          "SO_INCOMING_CPU and the kernel's reuseport hash only",
                          format_cpu_list(cpus));
        }
        for (std::size_t i = 0; i < cpus.size(); ++i) {
            engine::ShardSetup setup;
            setup.index = static_cast<int>(i);
            setup.config = &config_;
            setup.upstream = upstream;
            setup.cpu = cpus[i];
            setup.worker_cpus = worker_cpus(cpus[i]);
            setup.listener.address = listen;
            setup.listener.cpu = cpus[i];
            setup.listener.set_incoming_cpu = config_.steer_by_cpu && tcp;
            if (i == 0)
                setup.listener.steering_base = steering_base;
            else if (!tcp)
                setup.listener.shared_fd = shards_[0]->listener_fd();
            launch_shard(std::move(setup));
            if (i == 0) // port 0 is resolved by the first bind; the others join that port
                listen = bound_ = shards_[0]->bound_address();
        }
    }

    // The kernel takes a provided-buffer ring of a power-of-two size up to 32768
    // entries, each buffer's length a 32-bit value; say so before any shard starts.
    void check_copy_buffers() const {
        if (config_.data_path == DataPath::Splice)
            return;
        unsigned n = config_.copy_buffers;
        if (n == 0 || n > 32768 || (n & (n - 1)) != 0)
            throw StartError(
                fmt::format("copy_buffers must be a power of two between 1 and 32768, not {}", n));
        if (config_.copy_buffer_size == 0 || config_.copy_buffer_size > (std::size_t{1} << 30))
            throw StartError(fmt::format("copy_buffer_size must be between 1 byte and 1 GiB, "
                                         "not {}",
                                         config_.copy_buffer_size));
    }

    Endpoint listen_endpoint() const { return engine::to_endpoint(bound_); }

    std::string describe() const {
        std::map<int, int> per_node;
        for (const auto& shard : shards_)
            ++per_node[topology_.node_of_cpu(shard->cpu())];
        std::string nodes;
        for (auto [node, count] : per_node)
            nodes += fmt::format("{}{}: {}", nodes.empty() ? "" : ", ",
                                 node < 0 ? "node ?" : fmt::format("node {}", node), count);
        std::string out = fmt::format("listening on {}, forwarding to {}; {} shards ({})",
                                      listen_endpoint().to_string(), config_.upstream.to_string(),
                                      shards_.size(), nodes);
        for (std::size_t i = 0; i < shards_.size(); ++i)
            out += fmt::format("; shard {}: {}", i, shards_[i]->describe());
        return out;
    }

    void stop(std::optional<std::chrono::milliseconds> drain) {
        for (auto& shard : shards_)
            shard->request_stop(drain.value_or(config_.drain_timeout));
    }

    void wait() {
        for (std::thread& t : threads_)
            if (t.joinable())
                t.join();
        remove_unix_socket_file();
    }

    std::vector<ShardStats> shard_stats() const {
        std::map<int, uint64_t> workers = count_iowq_workers();
        std::vector<ShardStats> out;
        for (std::size_t i = 0; i < shards_.size(); ++i) {
            ShardStats s;
            s.shard = static_cast<int>(i);
            s.cpu = shards_[i]->cpu();
            s.node = topology_.node_of_cpu(s.cpu);
            shards_[i]->counters().add_to(s.counters);
            s.counters.iowq_threads =
                workers[shards_[i]->counters().thread_id.load(std::memory_order_relaxed)];
            out.push_back(s);
        }
        return out;
    }

    bool stopped() const {
        for (const auto& shard : shards_)
            if (!shard->finished())
                return false;
        return true;
    }

    EngineStats stats() const {
        EngineStats total;
        for (const ShardStats& s : shard_stats())
            total += s.counters;
        return total;
    }

private:
    void launch_shard(engine::ShardSetup setup) {
        auto shard = std::make_unique<engine::Shard>(
            setup, log_.with_prefix(fmt::format("shard {}", setup.index)));
        std::promise<void> ready;
        std::future<void> started = ready.get_future();
        engine::Shard* raw = shard.get();
        shards_.push_back(std::move(shard));
        threads_.emplace_back([raw, promise = std::move(ready)]() mutable { raw->run(promise); });
        try {
            started.get();
        } catch (const std::exception& e) {
            threads_.back().join();
            stop(std::chrono::milliseconds{0}); // shards already running
            wait();
            throw StartError(e.what());
        }
    }

    // The io-wq workers of the ring(s) a thread submits to are named
    // "iou-wrk-<submitter tid>" (io_uring/io-wq.c create_io_worker).
    static std::map<int, uint64_t> count_iowq_workers() {
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

    // Which CPUs a shard's io-wq workers may use.
    std::vector<int> worker_cpus(int shard_cpu) const {
        if (config_.worker_placement == EngineConfig::WorkerPlacement::ShardNode) {
            int node = topology_.node_of_cpu(shard_cpu);
            if (node >= 0)
                return topology_.node_cpus[static_cast<std::size_t>(node)];
        }
        return {shard_cpu};
    }

    void remove_unix_socket_file() {
        if (bound_.family() != AF_UNIX || unlinked_)
            return;
        unlinked_ = true;
        auto* un = reinterpret_cast<const sockaddr_un*>(&bound_.storage);
        if (un->sun_path[0] != '\0') // not abstract
            ::unlink(un->sun_path);
    }

    EngineConfig config_;
    engine::Logger log_;
    NumaTopology topology_;
    std::vector<std::unique_ptr<engine::Shard>> shards_;
    std::vector<std::thread> threads_;
    engine::SocketAddress bound_;
    bool unlinked_ = false;
};

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
std::string Engine::describe() const {
    return impl_->describe();
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

} // namespace uringfwd
