// The binary's configuration file: loaded at start (--config, --check) and again on
// SIGHUP, with the command line's flags given over it each time.
#pragma once

#include "cli/control/commands.hpp"
#include "cli/process_log.hpp"
#include "cli/service_notify.hpp"
#include "uringfwd/config.hpp"
#include "uringfwd/engine.hpp"
#include "uringfwd/operations.hpp"

namespace CLI {
class App;
}

namespace uringfwd::cli {

struct Flags;

// --config FILE: the file's configuration with the engine flags given over it, its names
// (hosts, users, groups) looked up as the engine's start will. A file with errors prints
// each as "FILE:LINE: message" (what editors jump to) and exits 1; --check stops after
// the file, printing "FILE: ok" and its routes.
EngineConfig config_from_file(const CLI::App& app, const Flags& flags,
                              OperationsConfig& operations);

// SIGHUP under systemd: RELOADING=1 before, READY=1 after, whatever the outcome (the
// old configuration still serves when the new one is refused). The file is read again
// and its routes served; a file with errors changes nothing, each error a line of the
// log; engine-wide settings wait for a restart.
void reload(Engine& engine, const CLI::App& app, const Flags& flags, EngineConfig& running,
            const OperationsConfig& operations, control::ProcessFacts& facts,
            const ServiceNotifier& notify, const ProcessLog& log);

} // namespace uringfwd::cli
