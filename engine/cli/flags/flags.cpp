// add_flags() declares the flags in --help's order: --config and --check, then the route,
// engine and operation groups (flag_groups.hpp), then the footer.
#include "cli/flags/flags.hpp"

#include "cli/flags/flag_groups.hpp"
#include "cli/process_log.hpp"

#include <cstdlib>

namespace uringfwd::cli {

void fail(const std::string& message) {
    process_log().error("{}", message);
    std::exit(1);
}

void add_flags(CLI::App& app, Flags& flags) {
    app.add_option("-c,--config", flags.config_path,
                   "routes, pools and engine settings from a TOML file (see "
                   "examples/uring-fwd.toml); it replaces the route flags, " +
                       route_flag_list() +
                       ", which are refused beside it, and engine flags given as well override "
                       "its [engine] values");
    app.add_flag("--check", flags.check,
                 "with --config: check the file and exit, printing \"FILE: ok\" and its routes "
                 "(status 0) or every error as FILE:LINE: message (status 1)");
    add_route_flags(app, flags);
    add_engine_flags(app, flags);
    add_operation_flags(app, flags);
    app.footer("A DURATION is a whole number and a unit, as in the configuration file: 250ms, "
               "2s, 5m, 1h (and 50us for --busy-poll), or 0; a number without a unit is "
               "refused.\n"
               "With --config, the engine flags above (--shards, --cpus, --data-path, ...) "
               "override the file's [engine] values; --cpus and --numa-node replace its cpus "
               "and numa_nodes together.\n"
               "uring-fwd ctl [--control PATH] COMMAND... sends one command to a running "
               "process's control socket and prints the reply (uring-fwd ctl --help).");
}

void apply_flags_over_file(const CLI::App& app, const Flags& flags, EngineConfig& config) {
    refuse_route_flags(app);
    apply_engine_flags(app, flags, config);
}

} // namespace uringfwd::cli
