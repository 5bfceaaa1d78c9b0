// Without an idle timeout a client that goes silent (a crashed host, a dropped NAT
// mapping) holds its connection, its upstream's and their buffers for ever. The default
// stays 0 (never), as before; HAProxy warns at start about a proxy without its client
// and server timeouts, and so does the binary, once, naming every route without one.
#pragma once

#include "uringfwd/config.hpp"

#include <string>

namespace uringfwd::cli {

// The warning for the routes of `config` whose idle_timeout is 0, saying how to set it
// in the configuration file (`from_file`) or with --idle-timeout; "" when every route
// has one.
std::string idle_timeout_warning(const EngineConfig& config, bool from_file);

} // namespace uringfwd::cli
