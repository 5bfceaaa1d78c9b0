// What --check prints for a valid file after "FILE: ok": one line naming each route,
// where it listens and what it forwards to, so a glance confirms the file says what was
// meant.
#pragma once

#include "uringfwd/config.hpp"

#include <string>

namespace uringfwd::cli {

// "2 routes: web on 127.0.0.1:8080, [::1]:8080 -> 3 upstreams (1 backup), round-robin;
// db on unix:/run/db.sock -> 1 upstream, least-active"
std::string summarize_routes(const EngineConfig& config);

} // namespace uringfwd::cli
