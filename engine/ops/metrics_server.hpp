// Serves an engine's metrics at http://ADDR/metrics in Prometheus' text format, with
// prometheus-cpp's exposer (its own HTTP threads, civetweb). Each scrape reads the
// engine's snapshots then (metrics_families.hpp): between scrapes it costs nothing.
#pragma once

#include "uringfwd/endpoint.hpp"
#include "uringfwd/engine.hpp"

#include <cstdint>
#include <memory>

namespace uringfwd::ops {

class AccessLog;

class MetricsServer {
public:
    // Binds `address` (TCP; port 0: any free port) and serves `engine` (and the access
    // log's counters when `access_log` is set); both must outlive the server. Throws
    // std::runtime_error naming the address when it cannot listen.
    MetricsServer(Endpoint address, const Engine& engine, const AccessLog* access_log);
    ~MetricsServer();

    MetricsServer(const MetricsServer&) = delete;
    MetricsServer& operator=(const MetricsServer&) = delete;

    // The port actually bound.
    uint16_t port() const;

private:
    struct State;
    std::unique_ptr<State> state_;
};

} // namespace uringfwd::ops
