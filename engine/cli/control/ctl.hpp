// `uring-fwd ctl [--control PATH | --config FILE] COMMAND...`: sends one command to a
// running uring-fwd's control socket and prints the reply (README "Runtime control").
#pragma once

namespace uringfwd::cli::control {

// Exit statuses: 0 the command succeeded, 1 it replied "error: ...", 2 no reply (no
// socket path known, cannot connect, the connection failed, a bad argument).
inline constexpr int kCtlOk = 0;
inline constexpr int kCtlCommandError = 1;
inline constexpr int kCtlNoReply = 2;

// argv[0] is the program, argv[1] "ctl". Returns the exit status.
int ctl_main(int argc, char** argv);

} // namespace uringfwd::cli::control
