// Binary upgrade without refusing a connection (docs/service.md): the running process
// listens on a control socket (--upgrade-socket PATH); a new process started with the
// same PATH connects, receives every listening socket with SCM_RIGHTS, starts accepting
// on them, and only then tells the old process, which stops accepting without closing
// the sockets and drains. The same socket objects pass, never new binds: closing a
// listener of an SO_REUSEPORT group resets the clients queued in its backlog.
//
// The conversation, one SOCK_SEQPACKET message each:
//   new -> old  "take-over"
//   old -> new  "fds" carrying up to kFdsPerMessage fds, as many as needed; then, when
//               it serves a control socket (--control), "control PATH" carrying its
//               listening socket; then "end PID", or "end PID pipes connections" when it
//               offers its open connections too (handover = "connections"), with the
//               bytes it holds of them in pipes ("pipes"; an older version offers
//               "end PID connections"; a successor that predates the offer reads the pid
//               and ignores the rest)
//   new -> old  "accepting"       (or the connection closes: the new one failed, and
//                                  the old one goes on as if nothing happened), or
//               "accepting control" when it serves the control socket it was given
//               (its --control is the same PATH): the old one then leaves the file;
//               either with " connections" after it when it takes the offer, or
//               " pipes connections" when it takes connections with their pipes too
//               (only when those were offered)
//   old -> new  "released"
// and then, when the offer was taken, the connections (connection_handover.hpp) on the
// same socket.
#pragma once

#include "cli/process_log.hpp"
#include "ops/unique_fd.hpp"
#include "uringfwd/engine.hpp"
#include "uringfwd/socket_file.hpp"

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace uringfwd::cli {

// The new process's side.
class UpgradeTakeover {
public:
    // Asks the process listening on `path` for its sockets. nullopt when none listens
    // there (a first start); throws std::runtime_error when one does but the
    // exchange fails.
    static std::optional<UpgradeTakeover> connect(const std::string& path);

    // The sockets received (ours until the engine has dup'd them).
    std::vector<int> fds() const;
    pid_t old_pid() const { return old_pid_; }
    // The old process's control socket, when it had one at `path` (else invalid): ours
    // to serve; finish() then tells it so.
    ops::UniqueFd take_control_socket(const std::string& path);
    bool took_control_socket() const { return control_taken_; }

    // Our engine accepts on the sockets: tells the old process to let go (and, with
    // `take_connections`, that we take its connections, if it offered them) and waits
    // (bounded) until it has. False, with the reason logged, when it did not answer; both then
    // accept on the sockets until it ends, which loses nothing.
    bool finish(const ProcessLog& log, bool take_connections = false);
    // After finish() returned true: the socket its connections come on
    // (ConnectionReceiver), invalid unless it offered them and finish() took them.
    ops::UniqueFd take_conversation() { return std::move(conn_); }

private:
    ops::UniqueFd conn_;
    std::vector<ops::UniqueFd> fds_;
    pid_t old_pid_ = -1;
    std::string control_path_;
    ops::UniqueFd control_;
    bool control_taken_ = false;
    bool offers_connections_ = false;
    bool offers_pipes_ = false; // " pipes connections": its connections' pipes go along
};

// The running process's side.
class UpgradeListener {
public:
    // Binds `path`, mode 0600, replacing only a socket file nobody accepts on (callers
    // first tried to connect to it). Throws std::runtime_error, naming what is there
    // when it is anything else (a regular file, a directory, a live socket).
    // Destroyed, it removes the file it bound, unless a successor has the path now or
    // the file there is no longer the one it bound.
    explicit UpgradeListener(std::string path);
    UpgradeListener(const UpgradeListener&) = delete;
    UpgradeListener& operator=(const UpgradeListener&) = delete;

    // Non-blocking check for a successor; when one asks, hands it `engine`'s listening
    // sockets (and the control socket `control_fd` at `control_path`, when >= 0) and
    // waits (bounded) for it to accept on them. True once it has: the
    // engine's listeners are released (Engine::release_listeners()) and this socket
    // is closed; the caller then drains with Engine::stop(). False otherwise, with
    // what went wrong logged; the engine serves on.
    // `offer_connections`: hand over open connections too (handover = "connections").
    bool serve_successor(Engine& engine, const ProcessLog& log, int control_fd = -1,
                         const std::string& control_path = {}, bool offer_connections = false);
    // After serve_successor() returned true: the successor serves the control socket
    // too (its file is the successor's to remove).
    bool successor_took_control() const { return successor_took_control_; }
    // After serve_successor() returned true: the successor takes the open connections,
    // over this socket (ConnectionSender); invalid when it does not.
    ops::UniqueFd take_conversation() { return std::move(conversation_); }
    // It takes connections with what they hold in pipes (UnsentBytes::GoAlong).
    bool successor_takes_pipes() const { return successor_takes_pipes_; }
    pid_t successor_pid() const { return successor_pid_; }

private:
    std::string path_;
    ops::UniqueFd fd_;
    OwnedSocketFile file_; // the file our bind made, until a successor has the path
    bool handed_over_ = false;
    bool successor_took_control_ = false;
    bool successor_takes_pipes_ = false;
    ops::UniqueFd conversation_; // kept for the connections' hand-over
    pid_t successor_pid_ = -1;
};

// SIGRTMIN+1: starts the successor of this process, the binary now at our executable's
// path (a package upgrade replaced the file; /proc/self/exe names the old one with
// " (deleted)") with our arguments and an empty signal mask. A child of ours, so it
// runs in the same service cgroup under systemd. Returns its pid, or -1 (logged).
pid_t start_successor(char** argv, const ProcessLog& log);

} // namespace uringfwd::cli
