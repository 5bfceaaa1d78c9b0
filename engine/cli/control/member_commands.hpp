// The commands over pool members and open connections: thin clients of the engine's
// runtime API (uringfwd/runtime.hpp: Engine::set_member_state(), members(),
// connections(), close_connection(), ...), each change applied on every shard before
// the engine returns.
#pragma once

#include "cli/control/command.hpp"
#include "cli/control/control_server.hpp"
#include "uringfwd/engine.hpp"

namespace uringfwd::cli::control {

Reply show_members(const Command& command, Engine& engine);
Reply show_connections(const Command& command, Engine& engine);
// SetMemberState, SetMemberWeight, AddMember, DelMember, CloseConnection,
// CloseConnections, MoveConnection and Rebalance: one line saying what was done, or
// the engine's error.
Reply change(const Command& command, Engine& engine);

} // namespace uringfwd::cli::control
