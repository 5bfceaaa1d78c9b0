// The three groups of flags, each declared and applied by a file of its own: the route
// flags (route_flags.cpp: what to serve, replaced by a file's routes), the engine flags
// (engine_flags.cpp: shards, pipes, data path; override a file's [engine] values) and
// the operation flags (operation_flags.cpp: metrics, access log, upgrade and control
// sockets). add_flags() (flags.cpp) declares them in this order, which is --help's.
#pragma once

#include "cli/flags/flags.hpp"

#include <CLI/CLI.hpp>

#include <string>

namespace uringfwd::cli {

// "--listen, --dual-stack, ... and --inspect-timeout", for --config's help.
std::string route_flag_list();
void add_route_flags(CLI::App& app, Flags& flags);
// With --config: ends the program, naming the file's key, when a route flag was given.
void refuse_route_flags(const CLI::App& app);

void add_engine_flags(CLI::App& app, Flags& flags);
// Each engine-wide flag that was given, over `config`. Without --config every default
// equals EngineConfig's, so writing only the given ones is the same as writing all.
void apply_engine_flags(const CLI::App& app, const Flags& flags, EngineConfig& config);

void add_operation_flags(CLI::App& app, Flags& flags);

} // namespace uringfwd::cli
