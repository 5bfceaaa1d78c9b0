#include "cli/control/control_socket.hpp"

#include <fmt/format.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace uringfwd::cli::control {
namespace {

// Enough for a few clients connecting at once; ControlServer takes 16 at a time.
constexpr int kBacklog = 16;

[[noreturn]] void fail(const std::string& path, std::string_view what) {
    throw std::runtime_error(
        fmt::format("control socket {}: {}: {}", path, what, std::strerror(errno)));
}

} // namespace

ControlSocket ControlSocket::bind(const std::string& path, unsigned mode,
                                  std::optional<gid_t> group) {
    if (path.empty() || path.size() >= sizeof(sockaddr_un{}.sun_path))
        throw std::runtime_error(fmt::format("control socket {}: the path is empty or longer "
                                             "than {} bytes",
                                             path, sizeof(sockaddr_un{}.sun_path) - 1));
    ControlSocket out;
    out.path_ = path;
    out.fd_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!out.fd_)
        fail(path, "socket");
    // A socket file left by a process that ended is replaced; a live one, or any other
    // file, is an error naming the path (bind_unix_path() throws).
    if (bind_unix_path(out.fd_.get(), path, fmt::format("control socket {}", path)) != 0)
        fail(path, "bind");
    // Ours from here: removed again if anything below throws.
    out.file_ = OwnedSocketFile(path);
    // Before listen(2): until then a connect is refused, so nobody reaches the socket
    // while its file has bind's umask-derived mode.
    if (::chmod(path.c_str(), mode) != 0)
        fail(path, fmt::format("chmod {:04o}", mode));
    if (group && ::chown(path.c_str(), static_cast<uid_t>(-1), *group) != 0)
        fail(path, fmt::format("chown to group {}", *group));
    if (::listen(out.fd_.get(), kBacklog) != 0)
        fail(path, "listen");
    return out;
}

ControlSocket ControlSocket::adopt(ops::UniqueFd fd, const std::string& path) {
    ControlSocket out;
    out.path_ = path;
    out.fd_ = std::move(fd);
    return out;
}

} // namespace uringfwd::cli::control
