// "did you mean ...?" for a misspelt key: typos must not pass silently, and naming the
// intended key turns the error into its own fix. Public (uringfwd/messages.hpp), so the
// binary's control socket suggests commands with the same rule.
#pragma once

#include "uringfwd/messages.hpp"

namespace uringfwd::config {

using uringfwd::closest_name;

} // namespace uringfwd::config
