#include "ops/metrics_server.hpp"

#include "ops/access_log.hpp"
#include "ops/metrics_families.hpp"
#include "ops/unique_fd.hpp"

#include <CivetServer.h>
#include <civetweb.h>
#include <fmt/format.h>
#include <prometheus/collectable.h>
#include <prometheus/exposer.h>

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

// Only /metrics answers: civetweb hands a handler every path under its URI and every
// path that merely starts with it ("/metrics/x", "/metricsx"), and a scraper sent to
// a wrong path should hear so. Called by civetweb for each request before its handlers.
int only_the_metrics_path(mg_connection* conn) {
    const mg_request_info* request = mg_get_request_info(conn);
    if (request != nullptr && request->local_uri != nullptr &&
        std::strcmp(request->local_uri, "/metrics") == 0)
        return 0; // on to the exposer's handler
    mg_send_http_error(conn, 404, "%s", "not found: the metrics are at /metrics\n");
    return 404; // answered (the status, for civetweb's access log)
}

// Connects to the exposer's own port and hangs up. civetweb's listening thread waits in
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
    std::shared_ptr<EngineCollectable> collectable;
    std::unique_ptr<prometheus::Exposer> exposer;
};

MetricsServer::MetricsServer(Endpoint address, const Engine& engine, const AccessLog* access_log)
    : state_(std::make_unique<State>()) {
    state_->address = address;
    const std::string port = civetweb_port(address);
    check_can_listen(address);
    CivetCallbacks callbacks; // zeroed by its constructor; civetweb copies it
    callbacks.begin_request = only_the_metrics_path;
    try {
        // One HTTP thread: a scraper or two, a few requests a minute.
        state_->exposer = std::make_unique<prometheus::Exposer>(port, 1, &callbacks);
    } catch (const std::exception& e) {
        // Taken between our check and civetweb's bind, or something else civetweb
        // does not name.
        throw std::runtime_error(
            fmt::format("cannot serve metrics on {}: {}", address.to_string(), e.what()));
    }
    state_->collectable = std::make_shared<EngineCollectable>(engine, access_log);
    state_->exposer->RegisterCollectable(state_->collectable, "/metrics");
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
    state_->exposer.reset();
    stopped.store(true);
    knocker.join();
}

uint16_t MetricsServer::port() const {
    const std::vector<int> ports = state_->exposer->GetListeningPorts();
    return ports.empty() ? 0 : static_cast<uint16_t>(ports.front());
}

} // namespace uringfwd::ops
