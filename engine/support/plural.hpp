// count_of() is public (uringfwd/messages.hpp), so the binary's lines count as the
// engine's do; the engine's code calls it as engine::count_of.
#pragma once

#include "uringfwd/messages.hpp"

#include <fmt/format.h>

namespace uringfwd::engine {

using uringfwd::count_of;

} // namespace uringfwd::engine
