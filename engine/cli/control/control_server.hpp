// Serves the control socket on a thread of its own (never a shard's): one poll(2) loop
// over the listening socket and at most ServerLimits::max_clients clients. Each client's
// lines are answered one at a time, in order, each reply followed by an empty line; a
// line longer than kMaxLineBytes gets "error: line too long" and the connection is
// closed; a client beyond max_clients takes the place of the one idle longest (which
// hears one "error:" line), or is refused with one when every client is mid-command; a
// client that moves no byte for idle_timeout is closed. A client holds one line and one reply at
// most, so nothing it sends makes the server allocate without bound.
#pragma once

#include "cli/control/command.hpp"
#include "cli/control/control_socket.hpp"

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <thread>

namespace uringfwd::cli::control {

// A command's answer: lines, each ending in '\n' (the server adds the empty line). An
// error is one line starting "error: ".
struct Reply {
    bool error = false;
    std::string text;
};
Reply error_reply(std::string_view message); // "error: <message>\n"

// Runs one parsed command, on the server's thread.
using CommandRunner = std::function<Reply(const Command&)>;

struct ServerLimits {
    std::size_t max_clients = 16;
    std::chrono::milliseconds idle_timeout{60000};
};

class ControlServer {
public:
    // Starts serving `socket` (its thread starts here). `runner` must outlive the server.
    ControlServer(ControlSocket socket, CommandRunner runner, ServerLimits limits = {});
    ~ControlServer(); // stops the thread, closes every client, removes the file if ours
    ControlServer(const ControlServer&) = delete;
    ControlServer& operator=(const ControlServer&) = delete;

    // The listening socket, for a binary upgrade's successor.
    int listen_fd() const;
    const std::string& path() const;
    // The predecessor of an upgrade has let go of an adopted socket: its file is ours
    // (ControlSocket::own_file()).
    void own_file();
    // A successor serves the socket now: stop accepting (clients being answered are
    // answered), and leave the file when we go.
    void hand_over();

private:
    struct State;
    std::unique_ptr<State> state_;
    std::thread thread_;
};

} // namespace uringfwd::cli::control
