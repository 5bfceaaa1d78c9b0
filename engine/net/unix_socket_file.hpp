// The engine's Unix listeners use the public socket-file rules (uringfwd/socket_file.hpp).
#pragma once

#include "uringfwd/socket_file.hpp"

namespace uringfwd::engine {

using uringfwd::bind_unix_path;
using uringfwd::clear_stale_socket;
using uringfwd::OwnedSocketFile;

} // namespace uringfwd::engine
