#include "cli/control/control_flag.hpp"

#include "cli/flags/flags.hpp"
#include "uringfwd/messages.hpp"

#include <fmt/format.h>

namespace uringfwd::cli::control {

void add_control_flag(CLI::App& app, std::string& path) {
    app.add_option("--control", path,
                   "serve runtime control on this Unix socket (mode 0600; `uring-fwd ctl "
                   "--control PATH help` lists the commands); removed on exit, kept across a "
                   "binary upgrade")
        ->type_name("PATH");
}

void apply_control_flag(const CLI::App& app, const std::string& path,
                        OperationsConfig& operations) {
    if (app.count("--control") == 0)
        return;
    // The file's rule (engine_section.cpp), so one path is good or bad in both.
    if (!is_upgrade_socket_path(path))
        fail(fmt::format("--control must be {}, not {}", kUpgradeSocketPath, quote_input(path)));
    operations.control = path;
}

} // namespace uringfwd::cli::control
