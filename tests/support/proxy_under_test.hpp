// An Engine running inside the test process, listening on an ephemeral loopback port
// (or a given endpoint) and forwarding to a test peer. Stops and joins on destruction,
// under a watchdog so a stuck shutdown fails loudly instead of hanging the suite.
#pragma once

#include "tests/support/deadline.hpp"
#include "uringfwd/engine.hpp"

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace uringfwd::test {

// Changes a test makes to the engine's configuration before it starts, on top of the
// defaults ProxyUnderTest gives it (see there): what the test sets wins.
using ConfigEdit = std::function<void(EngineConfig&)>;

class ProxyUnderTest {
public:
    // Forwards 127.0.0.1:0 to `upstream`. Before `edit` sees it, the configuration holds
    // the engine's defaults but for a connect_timeout of 2 s, log level warn (quiet: the
    // captured lines are printed when a test fails), and the data path, direct-descriptor
    // mode and splice mechanism under test (data_path_under_test.hpp), where one is.
    explicit ProxyUnderTest(const Endpoint& upstream, const ConfigEdit& edit = {});
    // Serves these routes instead (listen, upstream and connect_timeout stay unset).
    explicit ProxyUnderTest(std::vector<RouteConfig> routes, const ConfigEdit& edit = {});
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
    void start(EngineConfig config, const ConfigEdit& edit);
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
