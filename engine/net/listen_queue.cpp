#include "net/listen_queue.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>

namespace uringfwd::engine {

std::optional<std::size_t> accept_queue_length(int listen_fd) {
    int domain = 0;
    socklen_t len = sizeof(domain);
    if (::getsockopt(listen_fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 ||
        (domain != AF_INET && domain != AF_INET6))
        return std::nullopt;
    // For a socket in LISTEN, tcp_get_info() (net/ipv4/tcp.c) reports the accept
    // queue's length in tcpi_unacked and its limit in tcpi_sacked.
    tcp_info info{};
    len = sizeof(info);
    if (::getsockopt(listen_fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0 ||
        info.tcpi_state != TCP_LISTEN)
        return std::nullopt;
    return info.tcpi_unacked;
}

uint64_t socket_inode(int fd) {
    struct stat st {};
    if (::fstat(fd, &st) != 0)
        return 0;
    return static_cast<uint64_t>(st.st_ino);
}

} // namespace uringfwd::engine
