#include "cli/service_notify.hpp"

#include <fmt/format.h>

#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace uringfwd::cli {

ServiceNotifier::ServiceNotifier() {
    const char* socket = std::getenv("NOTIFY_SOCKET");
    // sd_notify(3): an absolute path, or '@' for the abstract namespace. Other forms
    // (vsock:, systemd 253) are not ours to serve.
    if (socket != nullptr && (socket[0] == '/' || socket[0] == '@') &&
        std::strlen(socket) < sizeof(sockaddr_un::sun_path))
        path_ = socket;
}

void ServiceNotifier::send(std::string_view state) const {
    if (path_.empty())
        return;
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, path_.data(), path_.size());
    socklen_t length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path_.size());
    if (path_[0] == '@')
        address.sun_path[0] = '\0'; // abstract: the name is the bytes after the NUL
    else
        ++length; // a path's terminating NUL
    const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return;
    [[maybe_unused]] ssize_t n =
        ::sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
                 reinterpret_cast<const sockaddr*>(&address), length);
    ::close(fd);
}

void ServiceNotifier::ready(std::string_view status) const {
    send(fmt::format("READY=1\nSTATUS={}", status));
}

void ServiceNotifier::reloading() const {
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    const long long usec = static_cast<long long>(now.tv_sec) * 1000000 + now.tv_nsec / 1000;
    send(fmt::format("RELOADING=1\nMONOTONIC_USEC={}\nSTATUS=reloading the configuration", usec));
}

void ServiceNotifier::stopping(std::string_view status) const {
    send(fmt::format("STOPPING=1\nSTATUS={}", status));
}

void ServiceNotifier::main_pid_ready(std::string_view status) const {
    send(fmt::format("MAINPID={}\nREADY=1\nSTATUS={}", ::getpid(), status));
}

} // namespace uringfwd::cli
