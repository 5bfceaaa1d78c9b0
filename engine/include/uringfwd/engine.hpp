// The public face of uring-fwd: start an engine, ask it what it does, stop it.
#pragma once

#include "uringfwd/config.hpp"
#include "uringfwd/stats.hpp"

#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace uringfwd {

// Thrown by Engine::start() when the engine cannot run: the message is one line meant
// for an operator ("port in use", "io_uring unavailable: ...").
class StartError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

class Engine {
public:
    // Starts the shard threads, binds listeners and returns once they accept
    // connections. Throws StartError.
    static std::unique_ptr<Engine> start(EngineConfig config);

    ~Engine(); // stops and joins if still running

    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    // The address actually bound (port 0 resolved to the real port).
    Endpoint listen_endpoint() const;

    // One line describing pipe size, ring features and the like, for a startup log.
    std::string describe() const;

    // Asks every shard to stop: listeners close at once (new clients are refused),
    // open connections may finish for `drain` (default: config.drain_timeout) and are
    // reset after that. stop(0ms) resets them at once; a later call may shorten the
    // drain. Thread-safe; returns immediately. Not async-signal-safe.
    void stop(std::optional<std::chrono::milliseconds> drain = std::nullopt);

    // Blocks until every shard has stopped.
    void wait();
    // True once every shard has stopped (wait() then returns at once).
    bool stopped() const;

    // Counters summed over shards, and per shard. Cheap enough to poll every second.
    EngineStats stats() const;
    std::vector<ShardStats> shard_stats() const;

    class Impl;

private:
    explicit Engine(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

} // namespace uringfwd
