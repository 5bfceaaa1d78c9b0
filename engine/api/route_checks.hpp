// What a route may not ask for, checked alike by validate() (Engine::start()), the
// route table a reload builds and the configuration file (at the key's line).
#pragma once

#include "uringfwd/route.hpp"

#include <string>
#include <string_view>

namespace uringfwd {

// Maglev's members own entries of a lookup table: a weight that ramps has no meaning
// there (a member coming up takes its clients back at once).
inline constexpr std::string_view kMaglevSlowStart =
    "slow_start cannot be used with balance = maglev: a Maglev lookup table has no weight to "
    "ramp up (a member that comes up takes its clients back at once)";

// kMaglevSlowStart when `route` asks for it (its own slow_start or a member's), else "".
std::string slow_start_problem(const RouteConfig& route);

} // namespace uringfwd
