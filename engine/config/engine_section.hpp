// [engine]: the engine-wide settings, with the same meaning as the binary's flags.
#pragma once

#include "config/error_list.hpp"
#include "uringfwd/config.hpp"
#include "uringfwd/config_file.hpp"

#include <toml++/toml.h>

namespace uringfwd::config {

// Writes each valid key of `table` into `config` (or `operations`: metrics and the
// access log); records an error for each bad one.
void read_engine_section(const toml::table& table, const TopologyReader& read_topology,
                         ErrorList& errors, EngineConfig& config, OperationsConfig& operations);

} // namespace uringfwd::config
