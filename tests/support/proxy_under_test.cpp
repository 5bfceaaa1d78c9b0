#include "tests/support/proxy_under_test.hpp"

#include "tests/support/data_path_under_test.hpp"
#include "tests/support/proc_stats.hpp"
#include "tests/support/watchdog.hpp"

#include <fmt/core.h>
#include <gtest/gtest.h>

namespace uringfwd::test {

Endpoint loopback_any_port() {
    Endpoint ep;
    ep.kind = Endpoint::Kind::Inet;
    ep.host = "127.0.0.1";
    ep.port = 0;
    return ep;
}

ProxyUnderTest::ProxyUnderTest(const Endpoint& upstream, const ConfigEdit& edit) {
    EngineConfig config;
    config.listen = loopback_any_port();
    config.upstream = upstream;
    config.connect_timeout = std::chrono::milliseconds{2000};
    start(std::move(config), edit);
}

ProxyUnderTest::ProxyUnderTest(std::vector<RouteConfig> routes, const ConfigEdit& edit) {
    EngineConfig config;
    config.routes = std::move(routes);
    start(std::move(config), edit);
}

void ProxyUnderTest::start(EngineConfig config, const ConfigEdit& edit) {
    config.log_level = LogLevel::Warn;
    if (auto path = data_path_under_test())
        config.data_path = *path;
    if (auto direct = direct_descriptors_under_test())
        config.ring.direct_descriptors = *direct;
    const std::optional<SpliceMechanism> mechanism = splice_mechanism_under_test();
    if (mechanism)
        config.splice.splice_mechanism = *mechanism;
    if (edit)
        edit(config);
    // A test that parks bulk sources keeps the engine's own choice of mechanism (the
    // ring's, docs/kernel.md §1.8) rather than the one under test: inline splices
    // cannot be had with bulk_park.
    if (mechanism && config.experimental.bulk_park.count() > 0 &&
        config.splice.splice_mechanism == *mechanism)
        config.splice.splice_mechanism = SpliceMechanism::Auto;
    config.log_sink = [logs = logs_](LogLevel level, std::string_view line) {
        std::lock_guard lock(logs->mu);
        logs->lines.push_back(fmt::format("[{}] {}", to_string(level), line));
    };
    config_ = config;
    engine_ = Engine::start(std::move(config));
}

ProxyUnderTest::~ProxyUnderTest() {
    {
        Watchdog dog{std::chrono::milliseconds{10000}, "Engine stop/wait"};
        // No drain: a test is over, whatever is still open is reset at once.
        engine_->stop(std::chrono::milliseconds{0});
        engine_->wait();
        engine_.reset();
    }
    // Show what the engine said when the test failed: that is when it matters.
    if (::testing::Test::HasFailure()) {
        for (const std::string& line : log_lines()) {
            fmt::print(stderr, "engine log: {}\n", line);
        }
    }
}

std::vector<std::string> ProxyUnderTest::log_lines() const {
    std::lock_guard lock(logs_->mu);
    return logs_->lines;
}

bool ProxyUnderTest::logs(std::string_view text, const Deadline& deadline) const {
    return eventually(
        [&] {
            for (const std::string& line : log_lines())
                if (line.find(text) != std::string::npos)
                    return true;
            return false;
        },
        deadline);
}

} // namespace uringfwd::test
