// What runs beside the engine rather than in it: a Prometheus /metrics endpoint, an
// access log and the control socket. The engine offers what they need (Engine::shard_stats(),
// route_stats(), member_health() and a ConnectionObserver); the uring-fwd binary serves them, and
// the configuration file's [engine] table can name them (metrics, access_log, access_log_format,
// access_log_flush), so an embedding application that loads the file sees the same settings.
#pragma once

#include "uringfwd/endpoint.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace uringfwd {

enum class UpgradeHandover : uint8_t { Connections, Listeners };

enum class AccessLogFormat {
    Text, // one line of key=value pairs
    Json, // one JSON object per line (JSON Lines)
};
std::string_view to_string(AccessLogFormat format); // "text", "json"
std::optional<AccessLogFormat> parse_access_log_format(std::string_view text);

struct OperationsConfig {
    // Where to serve Prometheus metrics at /metrics (TCP "HOST:PORT"); none: not served.
    std::optional<Endpoint> metrics;
    // A file to append one line per closed connection to, "-" for stderr; empty: off.
    std::string access_log;
    AccessLogFormat access_log_format = AccessLogFormat::Text;
    // How long a closed connection's line may wait in memory before the writer thread
    // writes it (--access-log-flush, [engine] access_log_flush; nginx's access_log
    // flush=): longer batches more lines per write(2), shorter puts them on disk sooner.
    // A reopen (SIGUSR2) and the exit write everything at once whatever it is.
    std::chrono::milliseconds access_log_flush{50};
    // The binary's binary-upgrade control socket (--upgrade-socket, [engine]
    // upgrade_socket; is_upgrade_socket_path()); empty: none. The engine offers what an
    // upgrade needs (Engine::listener_fds(), release_listeners(),
    // EngineConfig::Inherited::inherited_listeners); docs/service.md.
    std::string upgrade_socket;
    // What an upgrade hands the successor (--handover, [engine] handover;
    // docs/handover.md): its listening sockets and then every open connection, each as
    // soon as it is quiet (Connections, the default), or the listening sockets only,
    // the old process draining its connections (Listeners).
    UpgradeHandover handover = UpgradeHandover::Connections;
    // The binary's runtime control socket (--control, [engine] control; `uring-fwd ctl`
    // talks to it): a Unix stream socket at this path (the same rule as upgrade_socket:
    // is_upgrade_socket_path()); empty: none. Its file is made with control_mode, owner
    // only unless widened, and control_group (a name or number; empty: the process's).
    std::string control;
    unsigned control_mode = 0600;
    std::string control_group;

    bool operator==(const OperationsConfig&) const = default;
};

// The one rule for the binary-upgrade control socket's path ([engine] upgrade_socket,
// --upgrade-socket): absolute (the successor may start in another working directory,
// and both must name the same file) and short enough for sockaddr_un's sun_path (108
// bytes with its NUL). kUpgradeSocketPath says it for messages: "<key> must be <this>".
inline constexpr std::string_view kUpgradeSocketPath = "an absolute path of at most 107 bytes";
inline bool is_upgrade_socket_path(std::string_view path) {
    return !path.empty() && path.front() == '/' && path.size() <= 107;
}

} // namespace uringfwd
