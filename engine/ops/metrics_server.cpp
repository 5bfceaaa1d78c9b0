#include "ops/metrics_server.hpp"

#include "ops/access_log.hpp"
#include "ops/metrics_families.hpp"
#include "ops/unique_fd.hpp"

#include <CivetServer.h>
#include <civetweb.h>
#include <fmt/format.h>
#include <prometheus/collectable.h>
#include <prometheus/text_serializer.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

namespace uringfwd::ops {
namespace {

// Called on civetweb's HTTP thread at each scrape. route_stats() asks each shard on its own
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
        s.sources = engine_.source_table_stats();
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

// Binds `address` as civetweb is about to (SO_REUSEADDR), and lets go: when civetweb's
// own bind fails it says only "null context when constructing CivetServer", so the
// reason (in use, not a local address, a privileged port) is found out here first.
void check_can_listen(const Endpoint& address) {
    // As the engine resolves a listen address: no host is any IPv4 address.
    addrinfo hints{};
    hints.ai_family = address.kind == Endpoint::Kind::Inet6 ? AF_INET6 : AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* found = nullptr;
    const std::string port = std::to_string(address.port);
    const int rc = ::getaddrinfo(address.host.empty() ? nullptr : address.host.c_str(),
                                 port.c_str(), &hints, &found);
    if (rc != 0 || found == nullptr)
        throw std::runtime_error(fmt::format("cannot resolve {}: {}", address.host,
                                             rc != 0 ? gai_strerror(rc) : "no address"));
    const UniqueFd fd(::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    const int one = 1;
    const bool bound = fd &&
                       ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
                       ::bind(fd.get(), found->ai_addr, found->ai_addrlen) == 0;
    const int err = errno;
    ::freeaddrinfo(found);
    if (!bound)
        throw std::runtime_error(
            fmt::format("cannot serve metrics on {}: {}", address.to_string(), std::strerror(err)));
}

// Only /metrics, /ready and /live answer: civetweb hands a handler every path under its
// URI and every path that merely starts with it ("/metrics/x", "/metricsx"), and a
// scraper sent to a wrong path should hear so. Called by civetweb for each request
// before its handlers.
int only_our_paths(mg_connection* conn) {
    const mg_request_info* request = mg_get_request_info(conn);
    if (request != nullptr && request->local_uri != nullptr)
        for (const char* path : {"/metrics", "/ready", "/live"})
            if (std::strcmp(request->local_uri, path) == 0)
                return 0; // on to its handler
    mg_send_http_error(conn, 404, "%s",
                       "not found: the metrics are at /metrics (and /ready, /live)\n");
    return 404; // answered (the status, for civetweb's access log)
}

void respond(mg_connection* conn, int status, const char* reason, std::string_view content_type,
             std::string_view body) {
    mg_printf(conn,
              "HTTP/1.1 %d %s\r\nContent-Type: %.*s\r\nContent-Length: %zu\r\n"
              "Cache-Control: no-store\r\n\r\n",
              status, reason, static_cast<int>(content_type.size()), content_type.data(),
              body.size());
    mg_write(conn, body.data(), body.size());
}

// GET /metrics: Prometheus' text format (version 0.0.4), of the engine's snapshots now.
class MetricsHandler final : public CivetHandler {
public:
    explicit MetricsHandler(const EngineCollectable& collectable) : collectable_(collectable) {}
    bool handleGet(CivetServer*, mg_connection* conn) override {
        const std::string body = prometheus::TextSerializer().Serialize(collectable_.Collect());
        respond(conn, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", body);
        return true;
    }

private:
    const EngineCollectable& collectable_;
};

// GET /ready: 200 while every shard accepts, 503 before (starting) and after (draining,
// stopping); Kubernetes readiness probes and load balancers' health checks read the
// status. GET /live: 200 while the process can answer at all.
class ProbeHandler final : public CivetHandler {
public:
    ProbeHandler(const std::atomic<Readiness>& readiness, bool live)
        : readiness_(readiness), live_(live) {}
    bool handleGet(CivetServer*, mg_connection* conn) override {
        if (live_) {
            respond(conn, 200, "OK", "text/plain; charset=utf-8", "live\n");
            return true;
        }
        const Readiness r = readiness_.load();
        if (r == Readiness::Ready)
            respond(conn, 200, "OK", "text/plain; charset=utf-8", "ready\n");
        else
            respond(conn, 503, "Service Unavailable", "text/plain; charset=utf-8",
                    r == Readiness::Starting ? "starting\n" : "draining\n");
        return true;
    }

private:
    const std::atomic<Readiness>& readiness_;
    bool live_;
};

// Connects to the server's own port and hangs up. civetweb's listening thread waits in
// poll(2) for up to SOCKET_TIMEOUT_QUANTUM (2000 ms, civetweb.c) before it
// looks at its stop flag again; a connection wakes it at once.
void knock(const Endpoint& address, uint16_t port) {
    const bool v6 = address.kind == Endpoint::Kind::Inet6;
    const int fd = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return;
    sockaddr_storage ss{};
    socklen_t len = 0;
    if (v6) {
        auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
        a->sin6_family = AF_INET6;
        a->sin6_port = htons(port);
        // A wildcard bind is reached on loopback.
        if (address.host.empty() || address.host == "::" ||
            ::inet_pton(AF_INET6, address.host.c_str(), &a->sin6_addr) != 1)
            a->sin6_addr = in6addr_loopback;
        len = sizeof *a;
    } else {
        auto* a = reinterpret_cast<sockaddr_in*>(&ss);
        a->sin_family = AF_INET;
        a->sin_port = htons(port);
        if (address.host.empty() || address.host == "0.0.0.0" ||
            ::inet_pton(AF_INET, address.host.c_str(), &a->sin_addr) != 1)
            a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        len = sizeof *a;
    }
    (void)::connect(fd, reinterpret_cast<sockaddr*>(&ss), len);
    ::close(fd);
}

} // namespace

struct MetricsServer::State {
    Endpoint address;
    std::atomic<Readiness> readiness{Readiness::Starting};
    std::unique_ptr<EngineCollectable> collectable;
    std::unique_ptr<MetricsHandler> metrics;
    std::unique_ptr<ProbeHandler> ready;
    std::unique_ptr<ProbeHandler> live;
    std::unique_ptr<CivetServer> server; // last: stopped first, before its handlers go
};

MetricsServer::MetricsServer(Endpoint address, const Engine& engine, const AccessLog* access_log)
    : state_(std::make_unique<State>()) {
    state_->address = address;
    const std::string port = civetweb_port(address);
    check_can_listen(address);
    CivetCallbacks callbacks; // zeroed by its constructor; civetweb copies it
    callbacks.begin_request = only_our_paths;
    state_->collectable = std::make_unique<EngineCollectable>(engine, access_log);
    state_->metrics = std::make_unique<MetricsHandler>(*state_->collectable);
    state_->ready = std::make_unique<ProbeHandler>(state_->readiness, false);
    state_->live = std::make_unique<ProbeHandler>(state_->readiness, true);
    try {
        // One HTTP thread: a scraper or two and a probe, a few requests a minute.
        state_->server = std::make_unique<CivetServer>(
            std::vector<std::string>{"listening_ports", port, "num_threads", "1"}, &callbacks);
    } catch (const std::exception& e) {
        // Taken between our check and civetweb's bind, or something else civetweb
        // does not name.
        throw std::runtime_error(
            fmt::format("cannot serve metrics on {}: {}", address.to_string(), e.what()));
    }
    state_->server->addHandler("/metrics", state_->metrics.get());
    state_->server->addHandler("/ready", state_->ready.get());
    state_->server->addHandler("/live", state_->live.get());
}

void MetricsServer::set_readiness(Readiness readiness) {
    state_->readiness.store(readiness);
}

MetricsServer::~MetricsServer() {
    // Stopping civetweb waits for its listening thread; knocking on the port until it
    // is down turns a stop of up to 2 s into one of a millisecond or so.
    const uint16_t bound = port();
    std::atomic<bool> stopped{false};
    std::thread knocker([&] {
        while (!stopped.load()) {
            knock(state_->address, bound);
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
    });
    state_->server.reset();
    stopped.store(true);
    knocker.join();
}

uint16_t MetricsServer::port() const {
    const std::vector<int> ports = state_->server->getListeningPorts();
    return ports.empty() ? 0 : static_cast<uint16_t>(ports.front());
}

} // namespace uringfwd::ops
