#include "cli/seqpacket.hpp"

#include <fmt/format.h>

#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace uringfwd::cli {

void send_message(int fd, std::string_view text, const int* fds, std::size_t count) {
    iovec iov{const_cast<char*>(text.data()), text.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kFdsPerMessage)];
    if (count > 0) {
        msg.msg_control = control;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * count);
        cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
        cmsg->cmsg_level = SOL_SOCKET;
        cmsg->cmsg_type = SCM_RIGHTS;
        cmsg->cmsg_len = CMSG_LEN(sizeof(int) * count);
        std::memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * count);
    }
    if (::sendmsg(fd, &msg, MSG_NOSIGNAL) < 0)
        throw std::runtime_error(fmt::format("upgrade socket: send: {}", std::strerror(errno)));
}

std::string receive_message(int fd, std::vector<ops::UniqueFd>* fds, std::size_t max_bytes) {
    std::string buffer(max_bytes, '\0');
    iovec iov{buffer.data(), buffer.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kFdsPerMessage)];
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    const ssize_t n = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0)
        throw std::runtime_error(
            fmt::format("upgrade socket: receive: {}",
                        errno == EAGAIN ? "no answer within 30 s" : std::strerror(errno)));
    if (n == 0)
        throw std::runtime_error("upgrade socket: the other process closed the connection");
    for (cmsghdr* cmsg = CMSG_FIRSTHDR(&msg); cmsg != nullptr; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
        if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS)
            continue;
        const std::size_t count = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (std::size_t i = 0; i < count; ++i) {
            int passed = -1;
            std::memcpy(&passed, CMSG_DATA(cmsg) + i * sizeof(int), sizeof(int));
            ops::UniqueFd owned(passed);
            if (fds != nullptr)
                fds->push_back(std::move(owned));
        }
    }
    if (msg.msg_flags & MSG_CTRUNC)
        throw std::runtime_error("upgrade socket: too many fds in one message");
    if (msg.msg_flags & MSG_TRUNC)
        throw std::runtime_error("upgrade socket: a message longer than expected");
    buffer.resize(static_cast<std::size_t>(n));
    return buffer;
}

} // namespace uringfwd::cli
