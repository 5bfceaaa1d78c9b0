#include "tests/support/control_client.hpp"

#include "tests/support/socket_io.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>

namespace uringfwd::test {

UniqueFd connect_unix(const std::string& path) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, path.c_str(), std::min(path.size(), sizeof address.sun_path - 1));
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
        const int err = errno;
        fd.reset();
        errno = err;
    }
    return fd;
}

std::optional<std::string> read_reply(int fd, const Deadline& deadline) {
    std::string reply;
    char byte = 0;
    // A byte at a time: what follows the reply (the next one) stays in the socket.
    while (!(reply.size() >= 2 && reply.ends_with("\n\n"))) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, deadline.poll_timeout_ms()) <= 0)
            return std::nullopt;
        if (::recv(fd, &byte, 1, 0) != 1)
            return std::nullopt;
        reply += byte;
    }
    reply.pop_back();
    return reply;
}

std::optional<std::string> request(int fd, const std::string& line, const Deadline& deadline) {
    if (send_text(fd, line + "\n", deadline).status != IoStatus::Ok)
        return std::nullopt;
    return read_reply(fd, deadline);
}

std::string control_command(const std::string& path, const std::string& line) {
    const UniqueFd fd = connect_unix(path);
    if (!fd)
        throw std::runtime_error("cannot connect to " + path + ": " + std::strerror(errno));
    std::optional<std::string> reply = request(fd.get(), line, Deadline{milliseconds{10000}});
    if (!reply)
        throw std::runtime_error("no reply to \"" + line + "\" on " + path);
    return *reply;
}

CtlRun run_ctl(std::vector<std::string> args) {
    args.insert(args.begin(), "ctl");
    BinaryProcess ctl{uring_fwd_binary(), args};
    const std::optional<ExitStatus> status = ctl.wait_exit(Deadline{milliseconds{10000}});
    if (!status)
        throw std::runtime_error("uring-fwd ctl did not end within 10 s: " + ctl.stderr_text());
    return CtlRun{*status, ctl.stdout_text(), ctl.stderr_text()};
}

} // namespace uringfwd::test
