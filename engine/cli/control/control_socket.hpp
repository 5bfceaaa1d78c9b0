// The control socket's listening socket and its file: bound owner-only unless the
// configuration widens it, replacing only a stale socket file (never a live one, never
// another kind of file: uringfwd/socket_file.hpp), and removed on exit only while the
// path still names the socket we made. Across a binary upgrade the successor adopts the
// listening socket (SCM_RIGHTS, cli/upgrade.hpp) and the file with it.
#pragma once

#include "ops/unique_fd.hpp"
#include "uringfwd/socket_file.hpp"

#include <sys/types.h>

#include <optional>
#include <string>

namespace uringfwd::cli::control {

class ControlSocket {
public:
    // Binds and listens at `path`: the file gets `mode` and, when given, `group` before
    // the socket listens, so nobody connects while it is wider than asked. Throws
    // std::runtime_error naming the path (a live socket there, another kind of file, a
    // failed bind, chmod or chown).
    static ControlSocket bind(const std::string& path, unsigned mode, std::optional<gid_t> group);
    // A listening socket a predecessor handed over, whose file is at `path`. The file
    // stays the predecessor's until own_file(): a successor that fails to start must
    // not remove the file of the process that serves on.
    static ControlSocket adopt(ops::UniqueFd fd, const std::string& path);
    // The predecessor has let go: the file is ours to remove on exit. Throws
    // std::runtime_error when `path` no longer names a socket.
    void own_file() { file_ = OwnedSocketFile(path_); }

    int fd() const { return fd_.get(); }
    const std::string& path() const { return path_; }
    // A successor has the socket now: its file stays when we go.
    void disown() { file_.disown(); }

private:
    std::string path_;
    ops::UniqueFd fd_;
    OwnedSocketFile file_;
};

} // namespace uringfwd::cli::control
