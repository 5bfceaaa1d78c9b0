// An Engine running inside the test process, listening on an ephemeral loopback port
// (or a given endpoint) and forwarding to a test peer. Stops and joins on destruction,
// under a watchdog so a stuck shutdown fails loudly instead of hanging the suite.
#pragma once

#include "uringfwd/engine.hpp"

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace uringfwd::test {

struct ProxyOptions {
    // Default: 127.0.0.1:0.
    std::optional<Endpoint> listen;
    std::chrono::milliseconds connect_timeout{2000};
    std::size_t max_pipes = 128;
    std::size_t pipe_size = 0;
    // Unset: the path under test (data_path_under_test.hpp), else the engine's default.
    std::optional<DataPath> data_path;
    unsigned copy_buffers = 0; // 0: the engine's default
    std::chrono::microseconds busy_poll{0};
    // Quiet by default; the captured lines are printed when a test fails.
    LogLevel log_level = LogLevel::Warn;
};

class ProxyUnderTest {
public:
    explicit ProxyUnderTest(const Endpoint& upstream, ProxyOptions options = {});
    ~ProxyUnderTest();
    ProxyUnderTest(const ProxyUnderTest&) = delete;
    ProxyUnderTest& operator=(const ProxyUnderTest&) = delete;

    // Where clients connect (port resolved).
    Endpoint endpoint() const { return engine_->listen_endpoint(); }
    Engine& engine() { return *engine_; }
    EngineStats stats() const { return engine_->stats(); }

    // Log lines the engine produced so far.
    std::vector<std::string> log_lines() const;

private:
    struct LogBuffer {
        mutable std::mutex mu;
        std::vector<std::string> lines;
    };
    // Shared with the sink, which shard threads may call until the engine is joined.
    std::shared_ptr<LogBuffer> logs_ = std::make_shared<LogBuffer>();
    std::unique_ptr<Engine> engine_;
};

Endpoint loopback_any_port();

} // namespace uringfwd::test
