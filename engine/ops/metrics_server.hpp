// Serves an engine's metrics at http://ADDR/metrics in Prometheus' text format
// (prometheus-cpp's serializer, civetweb's HTTP thread), and the probes of an
// orchestrator: /ready (200 while every shard accepts, 503 while starting or draining)
// and /live (200 while the process runs). Each scrape reads the engine's snapshots then
// (metrics_families.hpp): between scrapes it costs nothing.
#pragma once

#include "uringfwd/endpoint.hpp"
#include "uringfwd/engine.hpp"

#include <cstdint>
#include <memory>

namespace uringfwd::ops {

class AccessLog;

// What GET /ready says: 503 "starting" until the binary says every shard accepts, 200
// "ready", then 503 "draining" once it stops taking clients (SIGTERM, a successor).
enum class Readiness { Starting, Ready, Draining };

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

    // What /ready answers from now on (thread-safe; Starting until called).
    void set_readiness(Readiness readiness);

private:
    struct State;
    std::unique_ptr<State> state_;
};

} // namespace uringfwd::ops
