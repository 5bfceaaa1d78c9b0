#include "ops/metrics_server.hpp"

#include "ops/access_log.hpp"
#include "ops/metrics_families.hpp"

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>

#include <stdexcept>
#include <string>

namespace uringfwd::ops {
namespace {

// Called on an exposer thread at each scrape. route_stats() asks each shard on its own
// thread for its counts (a wake-up per shard); the rest are relaxed loads of the
// shards' own counters.
class EngineCollectable final : public prometheus::Collectable {
public:
    EngineCollectable(const Engine& engine, const AccessLog* access_log)
        : engine_(engine), access_log_(access_log) {}

    std::vector<prometheus::MetricFamily> Collect() const override {
        MetricsSnapshot s;
        s.shards = engine_.shard_stats();
        s.routes = engine_.route_stats();
        s.health = engine_.member_health();
        if (access_log_ != nullptr) {
            s.access_log = true;
            s.access_log_lines = access_log_->lines();
            s.access_log_dropped = access_log_->dropped();
        }
        return metric_families(s);
    }

private:
    const Engine& engine_;
    const AccessLog* access_log_;
};

// civetweb's listening_ports: "127.0.0.1:9100", "[::1]:9100", or "9100" for every
// address.
std::string civetweb_port(const Endpoint& address) {
    if (address.is_unix())
        throw std::runtime_error("metrics: " + address.to_string() +
                                 ": must be a TCP address (HOST:PORT)");
    if (address.host.empty())
        return std::to_string(address.port);
    return address.to_string();
}

} // namespace

struct MetricsServer::State {
    std::shared_ptr<EngineCollectable> collectable;
    std::unique_ptr<prometheus::Exposer> exposer;
};

MetricsServer::MetricsServer(Endpoint address, const Engine& engine, const AccessLog* access_log)
    : state_(std::make_unique<State>()) {
    const std::string port = civetweb_port(address);
    try {
        // One HTTP thread: a scraper or two, a few requests a minute.
        state_->exposer = std::make_unique<prometheus::Exposer>(port, 1);
    } catch (const std::exception& e) {
        throw std::runtime_error("metrics: cannot listen on " + address.to_string() + ": " +
                                 e.what());
    }
    state_->collectable = std::make_shared<EngineCollectable>(engine, access_log);
    state_->exposer->RegisterCollectable(state_->collectable, "/metrics");
}

MetricsServer::~MetricsServer() = default;

uint16_t MetricsServer::port() const {
    const std::vector<int> ports = state_->exposer->GetListeningPorts();
    return ports.empty() ? 0 : static_cast<uint16_t>(ports.front());
}

} // namespace uringfwd::ops
