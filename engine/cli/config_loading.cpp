// The binary's configuration file (config_loading.hpp): read at start and again on
// SIGHUP.
#include "cli/config_loading.hpp"

#include "cli/flags/flags.hpp"
#include "cli/idle_timeout_warning.hpp"
#include "cli/route_summary.hpp"
#include "uringfwd/config_file.hpp"
#include "uringfwd/messages.hpp"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace uringfwd::cli {

uringfwd::EngineConfig config_from_file(const CLI::App& app, const Flags& flags,
                                        uringfwd::OperationsConfig& operations) {
    uringfwd::ConfigFileResult loaded =
        uringfwd::load_config_file(flags.config_path, {}, uringfwd::NameLookup::Resolve);
    if (!loaded.config) {
        for (const std::string& error : loaded.errors)
            std::fprintf(stderr, "%s\n", error.c_str());
        std::exit(1);
    }
    apply_flags_over_file(app, flags, *loaded.config);
    operations = loaded.operations;
    // What only the whole configuration shows (settings that contradict each other, a
    // flag given over the file) has no line of its own: Engine::start() would refuse
    // it, so --check and the start say so here, naming the file.
    if (const std::vector<std::string> problems = uringfwd::validate(*loaded.config);
        !problems.empty()) {
        for (const std::string& problem : problems)
            std::fprintf(stderr, "%s: %s\n", flags.config_path.c_str(), problem.c_str());
        std::exit(1);
    }
    if (flags.check) {
        std::printf("%s: ok\n%s\n", flags.config_path.c_str(),
                    summarize_routes(*loaded.config).c_str());
        // As a compiler warns: the file is good, and this is worth knowing.
        const std::string warning = idle_timeout_warning(*loaded.config, true);
        if (!warning.empty())
            std::fprintf(stderr, "%s: warning: %s\n", flags.config_path.c_str(), warning.c_str());
        std::exit(0);
    }
    return std::move(*loaded.config);
}

namespace {

// SIGHUP: read the file again and serve its routes. A file with errors (each printed
// as FILE:LINE: message) changes nothing; engine-wide settings wait for a restart.
// A running process's log, not a terminal: each FILE:LINE error is a line of it.
void reload_file(uringfwd::Engine& engine, const CLI::App& app, const Flags& flags,
                 uringfwd::EngineConfig& running, const uringfwd::OperationsConfig& operations,
                 control::ProcessFacts& facts, const ProcessLog& log) {
    if (flags.config_path.empty()) {
        log.warn("SIGHUP: no --config file to read again; ignored");
        return;
    }
    uringfwd::ConfigFileResult loaded =
        uringfwd::load_config_file(flags.config_path, {}, uringfwd::NameLookup::Resolve);
    if (!loaded.config) {
        for (const std::string& error : loaded.errors)
            log.error("SIGHUP: {}", error);
        log.error("SIGHUP: {} has {}; still serving the configuration loaded before",
                  flags.config_path, count_of(loaded.errors.size(), "error"));
        return;
    }
    apply_flags_over_file(app, flags, *loaded.config);
    uringfwd::ReloadResult result = engine.reconfigure(*loaded.config);
    if (!result.applied) {
        for (const std::string& error : result.errors)
            log.error("SIGHUP: {}", error);
        log.error("SIGHUP: not applied; still serving the configuration loaded before");
        return;
    }
    // The engine has logged the new routes and what needs a restart.
    running.routes = loaded.config->routes;
    apply_operation_flags(app, flags, loaded.operations);
    // The upgrade control socket is set at start only; a file that names another one is
    // not warned about (it never was).
    loaded.operations.upgrade_socket = operations.upgrade_socket;
    if (!(loaded.operations == operations))
        log.warn("SIGHUP: metrics, access_log and control keep their settings until a restart");
    facts.loaded_now();
    log.info("SIGHUP: reloaded {}", flags.config_path);
}

} // namespace

void reload(uringfwd::Engine& engine, const CLI::App& app, const Flags& flags,
            uringfwd::EngineConfig& running, const uringfwd::OperationsConfig& operations,
            control::ProcessFacts& facts, const ServiceNotifier& notify, const ProcessLog& log) {
    notify.reloading();
    reload_file(engine, app, flags, running, operations, facts, log);
    notify.ready("serving; reloaded on SIGHUP (see the log for the outcome)");
}

} // namespace uringfwd::cli
