// An Engine running inside the test process, listening on an ephemeral loopback port
// (or a given endpoint) and forwarding to a test peer. Stops and joins on destruction,
// under a watchdog so a stuck shutdown fails loudly instead of hanging the suite.
#pragma once

#include "tests/support/deadline.hpp"
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
    // Unset: the mode under test (URING_FWD_TEST_DIRECT), else the engine's default.
    std::optional<DirectDescriptors> direct_descriptors;
    // Unset: the mechanism under test (URING_FWD_TEST_SPLICE), else the engine's default.
    std::optional<SpliceMechanism> splice_mechanism;
    unsigned direct_table_size = 0;              // 0: the engine's default
    unsigned copy_buffers = 0;                   // 0: the engine's default
    std::optional<unsigned> bulk_buffers;        // unset: the engine's default
    std::optional<std::size_t> bulk_buffer_size; // unset: the engine's default
    std::chrono::microseconds busy_poll{0};
    std::chrono::milliseconds bulk_park{0};
    unsigned iowq_max_workers = 0; // 0: the engine's default
    std::size_t shards = 0;        // 0: the engine's default (one per CPU)
    std::vector<int> cpus;         // empty: the engine's default (every CPU allowed)
    bool steer_by_cpu = true;
    std::shared_ptr<ConnectionObserver> observer;
    // Quiet by default; the captured lines are printed when a test fails.
    LogLevel log_level = LogLevel::Warn;
};

class ProxyUnderTest {
public:
    explicit ProxyUnderTest(const Endpoint& upstream, ProxyOptions options = {});
    // Serves these routes instead (options.listen and connect_timeout do not apply).
    explicit ProxyUnderTest(std::vector<RouteConfig> routes, ProxyOptions options = {});
    ~ProxyUnderTest();
    ProxyUnderTest(const ProxyUnderTest&) = delete;
    ProxyUnderTest& operator=(const ProxyUnderTest&) = delete;

    // Where clients connect (port resolved): the first route's first address.
    Endpoint endpoint() const { return engine_->listen_endpoint(); }
    // The first address of `route`.
    Endpoint endpoint(std::string_view route) const {
        return engine_->listen_endpoints(route).at(0);
    }
    Engine& engine() { return *engine_; }
    // The configuration it started with, for reconfigure() tests to vary.
    const EngineConfig& config() const { return config_; }
    EngineStats stats() const { return engine_->stats(); }

    // Log lines the engine produced so far.
    std::vector<std::string> log_lines() const;
    // Whether a line containing `text` comes within `deadline` (lines may follow the
    // event they report by a moment).
    bool logs(std::string_view text, const Deadline& deadline) const;

private:
    void start(EngineConfig config, const ProxyOptions& options);
    struct LogBuffer {
        mutable std::mutex mu;
        std::vector<std::string> lines;
    };
    // Shared with the sink, which shard threads may call until the engine is joined.
    std::shared_ptr<LogBuffer> logs_ = std::make_shared<LogBuffer>();
    EngineConfig config_;
    std::unique_ptr<Engine> engine_;
};

Endpoint loopback_any_port();

} // namespace uringfwd::test
