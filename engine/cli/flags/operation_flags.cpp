// The operation flags: what runs beside the engine (metrics, the access log, the upgrade
// and control sockets), over the file's [engine] values or the defaults.
#include "cli/control/control_flag.hpp"
#include "cli/flags/duration_flag.hpp"
#include "cli/flags/flag_groups.hpp"
#include "cli/flags/flag_values.hpp"
#include "uringfwd/messages.hpp"
#include "uringfwd/operations.hpp"

#include <fmt/format.h>

namespace uringfwd::cli {

void add_operation_flags(CLI::App& app, Flags& flags) {
    app.add_option("--metrics", flags.metrics,
                   "serve Prometheus metrics at http://ADDR/metrics, e.g. 127.0.0.1:9100 "
                   "(default: not served)");
    app.add_option("--access-log", flags.access_log,
                   "one line per closed connection to this file (reopened on SIGUSR2, for "
                   "logrotate) or - for stderr (default: off)");
    app.add_option("--access-log-format", flags.access_log_format,
                   "the access log's lines: text (key=value) or json (JSON Lines)")
        ->check(CLI::IsMember({"text", "json"}))
        ->capture_default_str();
    add_duration(app, "--access-log-flush", flags.access_log_flush,
                 "how long a line may wait in memory before it is written (1ms..1h); "
                 "SIGUSR2 and the exit write every waiting line at once",
                 kAccessLogFlush);
    app.add_option("--upgrade-socket", flags.upgrade_socket,
                   "binary upgrade without refusing a connection: a process started with the "
                   "same PATH while one runs takes over its listening sockets, and the old "
                   "one drains; SIGRTMIN+1 makes the running process start its successor "
                   "(the binary now at its path, same arguments)")
        ->type_name("PATH");
    app.add_option("--handover", flags.handover,
                   "what an upgrade hands the successor: connections (the listening sockets, "
                   "then every open connection as soon as it is quiet; the old process "
                   "exits once they are gone) or listeners (the old process drains its "
                   "connections)")
        ->check(CLI::IsMember({"connections", "listeners"}))
        ->default_str("connections");
    control::add_control_flag(app, flags.control);
}

void apply_operation_flags(const CLI::App& app, const Flags& flags, OperationsConfig& operations) {
    if (app.count("--metrics") > 0) {
        if (flags.metrics.empty()) {
            operations.metrics.reset();
        } else {
            Endpoint address = parse_endpoint("--metrics", flags.metrics);
            if (address.is_unix())
                fail("--metrics: it must be a TCP address (HOST:PORT), not a Unix socket");
            operations.metrics = address;
        }
    }
    if (app.count("--access-log") > 0)
        operations.access_log = flags.access_log;
    if (app.count("--access-log-format") > 0)
        operations.access_log_format = *parse_access_log_format(flags.access_log_format);
    if (app.count("--access-log-flush") > 0)
        operations.access_log_flush =
            duration_flag<std::chrono::milliseconds>(flags.access_log_flush, kAccessLogFlush);
    if (app.count("--upgrade-socket") > 0) {
        // The file's rule (engine_section.cpp), so one path is good or bad in both.
        if (!is_upgrade_socket_path(flags.upgrade_socket))
            fail(fmt::format("--upgrade-socket must be {}, not {}", kUpgradeSocketPath,
                             quote_input(flags.upgrade_socket)));
        operations.upgrade_socket = flags.upgrade_socket;
    }
    if (app.count("--handover") > 0)
        operations.handover = flags.handover == "listeners" ? UpgradeHandover::Listeners
                                                            : UpgradeHandover::Connections;
    control::apply_control_flag(app, flags.control, operations);
}

} // namespace uringfwd::cli
