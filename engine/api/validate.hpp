// The part of validate() (uringfwd/config.hpp) that a reconfigure() refuses too: what is
// wrong with the routes themselves. The engine-wide settings a reconfigure() brings
// are not applied (they need a restart), so they are not checked again then.
#pragma once

#include "uringfwd/config.hpp"

#include <string>
#include <vector>

namespace uringfwd::engine {

// One line per problem of config.routes (and of config.access's allow and deny, the
// routes' default lists), as validate() words it; empty when none.
std::vector<std::string> route_problems(const EngineConfig& config);

} // namespace uringfwd::engine
