#include "uringfwd/engine.hpp"

#include "logger.hpp"
#include "shard.hpp"
#include "socket_address.hpp"

#include <sys/un.h>
#include <unistd.h>

#include <future>
#include <thread>
#include <vector>

#include <fmt/format.h>

namespace uringfwd {

class Engine::Impl {
public:
    explicit Impl(EngineConfig config)
        : config_(std::move(config)), log_(config_.log_level, config_.log_sink, "engine") {}

    ~Impl() {
        stop();
        wait();
    }

    void launch() {
        engine::SocketAddress listen;
        engine::SocketAddress upstream;
        try {
            listen = engine::resolve(config_.listen);
            upstream = engine::resolve(config_.upstream);
        } catch (const std::exception& e) {
            throw StartError(e.what());
        }
        launch_shard(0, listen, upstream);
        // Port 0 is resolved by the first shard's bind; the others join that port.
        bound_ = shards_[0]->bound_address();
    }

    Endpoint listen_endpoint() const { return engine::to_endpoint(bound_); }

    std::string describe() const {
        std::string out = fmt::format("listening on {}, forwarding to {}",
                                      listen_endpoint().to_string(), config_.upstream.to_string());
        for (std::size_t i = 0; i < shards_.size(); ++i)
            out += fmt::format("; shard {}: {}", i, shards_[i]->describe());
        return out;
    }

    void stop() {
        for (auto& shard : shards_)
            shard->request_stop();
    }

    void wait() {
        for (std::thread& t : threads_)
            if (t.joinable())
                t.join();
        remove_unix_socket_file();
    }

    EngineStats stats() const {
        EngineStats total;
        for (const auto& shard : shards_)
            shard->counters().add_to(total);
        return total;
    }

private:
    void launch_shard(int index, const engine::SocketAddress& listen,
                      const engine::SocketAddress& upstream) {
        engine::ShardSetup setup{index, &config_, listen, upstream};
        auto shard = std::make_unique<engine::Shard>(
            setup, log_.with_prefix(fmt::format("shard {}", index)));
        std::promise<void> ready;
        std::future<void> started = ready.get_future();
        engine::Shard* raw = shard.get();
        shards_.push_back(std::move(shard));
        threads_.emplace_back([raw, promise = std::move(ready)]() mutable { raw->run(promise); });
        try {
            started.get();
        } catch (const std::exception& e) {
            threads_.back().join();
            throw StartError(e.what());
        }
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

Endpoint Engine::listen_endpoint() const { return impl_->listen_endpoint(); }
std::string Engine::describe() const { return impl_->describe(); }
void Engine::stop() { impl_->stop(); }
void Engine::wait() { impl_->wait(); }
EngineStats Engine::stats() const { return impl_->stats(); }

} // namespace uringfwd
