// The binary's control socket at start (--control, [engine] control): the one an
// upgrade's predecessor hands over at the same path, or a fresh bind.
#pragma once

#include "cli/control/control_socket.hpp"
#include "cli/upgrade.hpp"
#include "uringfwd/operations.hpp"

#include <optional>

namespace uringfwd::cli::control {

// None when `operations` names no control socket. Bound before the engine starts, so a
// live socket at the path stops the start before anything listens. Throws
// std::runtime_error with the operator's message (the path, or "control_group: ...").
std::optional<ControlSocket> open_control_socket(const OperationsConfig& operations,
                                                 std::optional<UpgradeTakeover>& takeover);

} // namespace uringfwd::cli::control
