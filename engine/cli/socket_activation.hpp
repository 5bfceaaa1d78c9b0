// Listening sockets passed by systemd (socket activation, sd_listen_fds(3)): fds from 3
// on, $LISTEN_FDS of them, meant for this process when $LISTEN_PID is ours.
#pragma once

#include <string>
#include <vector>

namespace uringfwd::cli {

struct ActivatedSockets {
    std::vector<int> fds;           // made close-on-exec
    std::vector<std::string> names; // $LISTEN_FDNAMES, for the log (may be empty)
};

// Takes the passed sockets and unsets the three variables (as sd_listen_fds(3) with
// unset_environment does), so a child never mistakes them for its own. Empty when
// none were passed to this process.
ActivatedSockets take_activated_sockets();

} // namespace uringfwd::cli
