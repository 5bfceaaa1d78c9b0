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

ProxyUnderTest::ProxyUnderTest(const Endpoint& upstream, ProxyOptions options) {
    EngineConfig config;
    config.listen = options.listen.value_or(loopback_any_port());
    config.upstream = upstream;
    config.connect_timeout = options.connect_timeout;
    start(std::move(config), options);
}

ProxyUnderTest::ProxyUnderTest(std::vector<RouteConfig> routes, ProxyOptions options) {
    EngineConfig config;
    config.routes = std::move(routes);
    start(std::move(config), options);
}

void ProxyUnderTest::start(EngineConfig config, const ProxyOptions& options) {
    config.placement.shards = options.shards;
    config.placement.cpus = options.cpus;
    config.placement.steer_by_cpu = options.steer_by_cpu;
    config.observer = options.observer;
    config.splice.max_pipes = options.max_pipes;
    config.splice.pipe_size = options.pipe_size;
    config.log_level = options.log_level;
    config.ring.busy_poll = options.busy_poll;
    config.experimental.bulk_park = options.bulk_park;
    config.placement.iowq_max_workers = options.iowq_max_workers;
    if (options.copy_buffers != 0)
        config.copy.copy_buffers = options.copy_buffers;
    if (options.bulk_buffers)
        config.copy.bulk_buffers = *options.bulk_buffers;
    if (options.bulk_buffer_size)
        config.copy.bulk_buffer_size = *options.bulk_buffer_size;
    if (options.data_path)
        config.data_path = *options.data_path;
    else if (auto path = data_path_under_test())
        config.data_path = *path;
    if (options.direct_descriptors)
        config.ring.direct_descriptors = *options.direct_descriptors;
    else if (auto direct = direct_descriptors_under_test())
        config.ring.direct_descriptors = *direct;
    if (options.splice_mechanism)
        config.splice.splice_mechanism = *options.splice_mechanism;
    else if (auto mechanism = splice_mechanism_under_test();
             mechanism && options.bulk_park.count() == 0)
        config.splice.splice_mechanism = *mechanism;
    config.ring.direct_table_size = options.direct_table_size;
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
