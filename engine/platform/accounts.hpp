// The engine looks up users and groups with the public functions (uringfwd/accounts.hpp).
#pragma once

#include "uringfwd/accounts.hpp"

namespace uringfwd::engine {

using uringfwd::lookup_group;
using uringfwd::lookup_user;

} // namespace uringfwd::engine
