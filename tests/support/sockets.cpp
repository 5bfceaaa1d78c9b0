#include "tests/support/sockets.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fmt/core.h>
#include <fstream>
#include <stdexcept>
#include <system_error>

namespace uringfwd::test {
namespace {

struct SockAddr {
    sockaddr_storage storage{};
    socklen_t len = 0;
    int family() const { return storage.ss_family; }
    const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
};

[[noreturn]] void throw_errno(int err, const std::string& what) {
    throw std::system_error(err, std::generic_category(), what);
}

SockAddr to_sockaddr(const Endpoint& ep) {
    SockAddr out;
    switch (ep.kind) {
    case Endpoint::Kind::Unix: {
        auto* sun = reinterpret_cast<sockaddr_un*>(&out.storage);
        sun->sun_family = AF_UNIX;
        if (ep.host.size() >= sizeof(sun->sun_path)) {
            throw std::invalid_argument("unix path too long: " + ep.host);
        }
        std::memcpy(sun->sun_path, ep.host.data(), ep.host.size());
        if (!ep.host.empty() && ep.host[0] == '@') {
            sun->sun_path[0] = '\0'; // abstract namespace: no terminating NUL counted
            out.len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + ep.host.size());
        } else {
            out.len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + ep.host.size() + 1);
        }
        return out;
    }
    case Endpoint::Kind::Inet6: {
        auto* sin6 = reinterpret_cast<sockaddr_in6*>(&out.storage);
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons(ep.port);
        const std::string host = ep.host.empty() ? "::" : ep.host;
        if (inet_pton(AF_INET6, host.c_str(), &sin6->sin6_addr) != 1) {
            throw std::invalid_argument("bad IPv6 address: " + host);
        }
        out.len = sizeof(sockaddr_in6);
        return out;
    }
    case Endpoint::Kind::Inet: {
        auto* sin = reinterpret_cast<sockaddr_in*>(&out.storage);
        sin->sin_family = AF_INET;
        sin->sin_port = htons(ep.port);
        const std::string host = ep.host.empty() ? "0.0.0.0" : ep.host;
        if (inet_pton(AF_INET, host.c_str(), &sin->sin_addr) == 1) {
            out.len = sizeof(sockaddr_in);
            return out;
        }
        // A name such as "localhost": resolve to IPv4 only, loopback tests never leave
        // the machine.
        addrinfo hints{};
        hints.ai_family = AF_INET;
        hints.ai_socktype = SOCK_STREAM;
        addrinfo* res = nullptr;
        if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) {
            throw std::invalid_argument("cannot resolve: " + host);
        }
        std::memcpy(&sin->sin_addr, &reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr,
                    sizeof(in_addr));
        freeaddrinfo(res);
        out.len = sizeof(sockaddr_in);
        return out;
    }
    }
    throw std::invalid_argument("unknown endpoint kind");
}

uint16_t bound_port(int fd) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
        throw_errno(errno, "getsockname");
    }
    if (ss.ss_family == AF_INET6) {
        return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
    }
    return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
}

UniqueFd new_socket(int family) {
    UniqueFd fd{::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0)};
    if (!fd) {
        throw_errno(errno, "socket");
    }
    return fd;
}

} // namespace

Listener::Listener(UniqueFd fd, Endpoint endpoint)
    : fd_(std::move(fd)), endpoint_(std::move(endpoint)) {}

Listener::~Listener() {
    unlink_path();
}

Listener::Listener(Listener&& other) noexcept
    : fd_(std::move(other.fd_)), endpoint_(std::move(other.endpoint_)) {
    other.endpoint_ = Endpoint{};
}

Listener& Listener::operator=(Listener&& other) noexcept {
    if (this != &other) {
        unlink_path();
        fd_ = std::move(other.fd_);
        endpoint_ = std::move(other.endpoint_);
        other.endpoint_ = Endpoint{};
    }
    return *this;
}

void Listener::unlink_path() {
    if (fd_ && endpoint_.is_unix() && !endpoint_.host.empty() && endpoint_.host[0] != '@') {
        ::unlink(endpoint_.host.c_str());
    }
}

Listener listen_on(const Endpoint& where) {
    const SockAddr addr = to_sockaddr(where);
    UniqueFd fd = new_socket(addr.family());
    if (addr.family() != AF_UNIX) {
        int one = 1;
        ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    }
    if (::bind(fd.get(), addr.get(), addr.len) != 0) {
        throw_errno(errno, "bind " + where.to_string());
    }
    if (::listen(fd.get(), 4096) != 0) {
        throw_errno(errno, "listen " + where.to_string());
    }
    Endpoint resolved = where;
    if (!where.is_unix()) {
        resolved.port = bound_port(fd.get());
    }
    return Listener{std::move(fd), resolved};
}

std::string unique_unix_path(const std::string& tag) {
    static std::atomic<unsigned> counter{0};
    std::string path =
        fmt::format("/tmp/uringfwd-test-{}-{}-{}.sock", ::getpid(), tag, counter.fetch_add(1));
    ::unlink(path.c_str());
    return path;
}

Listener listen_loopback(Family family) {
    Endpoint ep;
    switch (family) {
    case Family::Inet4:
        ep.kind = Endpoint::Kind::Inet;
        ep.host = "127.0.0.1";
        break;
    case Family::Inet6:
        ep.kind = Endpoint::Kind::Inet6;
        ep.host = "::1";
        break;
    case Family::Unix:
        ep.kind = Endpoint::Kind::Unix;
        ep.host = unique_unix_path("peer");
        break;
    }
    return listen_on(ep);
}

int try_connect(const Endpoint& to, milliseconds timeout, UniqueFd& out) {
    const SockAddr addr = to_sockaddr(to);
    UniqueFd fd{::socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)};
    if (!fd) {
        return errno;
    }
    if (::connect(fd.get(), addr.get(), addr.len) != 0) {
        if (errno != EINPROGRESS && errno != EAGAIN) {
            return errno;
        }
        pollfd pfd{fd.get(), POLLOUT, 0};
        const Deadline deadline{timeout};
        int n = 0;
        do {
            n = ::poll(&pfd, 1, deadline.poll_timeout_ms());
        } while (n < 0 && errno == EINTR);
        if (n == 0) {
            return ETIMEDOUT;
        }
        int err = 0;
        socklen_t len = sizeof(err);
        ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
        if (err != 0) {
            return err;
        }
    }
    // Back to blocking: the I/O helpers poll with deadlines themselves.
    const int flags = ::fcntl(fd.get(), F_GETFL);
    ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
    if (addr.family() != AF_UNIX) {
        int one = 1;
        ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    out = std::move(fd);
    return 0;
}

UniqueFd connect_to(const Endpoint& to, milliseconds timeout) {
    UniqueFd fd;
    if (const int err = try_connect(to, timeout, fd); err != 0) {
        throw_errno(err, "connect " + to.to_string());
    }
    return fd;
}

UniqueFd accept_one(int listen_fd, const Deadline& deadline) {
    for (;;) {
        pollfd pfd{listen_fd, POLLIN, 0};
        const int n = ::poll(&pfd, 1, deadline.poll_timeout_ms());
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            throw_errno(errno, "poll on listener");
        }
        if (n == 0) {
            throw_errno(ETIMEDOUT, "accept");
        }
        UniqueFd fd{::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC)};
        if (fd) {
            return fd;
        }
        if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) {
            throw_errno(errno, "accept");
        }
    }
}

ReservedPort reserve_refusing_port() {
    UniqueFd fd = new_socket(AF_INET);
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sin), sizeof(sin)) != 0) {
        throw_errno(errno, "bind 127.0.0.1:0");
    }
    Endpoint ep;
    ep.kind = Endpoint::Kind::Inet;
    ep.host = "127.0.0.1";
    ep.port = bound_port(fd.get());
    return ReservedPort{std::move(fd), ep};
}

namespace {

// The first port of the kernel's ephemeral range (32768 by default).
uint16_t first_ephemeral_port() {
    std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
    unsigned low = 32768;
    range >> low;
    return static_cast<uint16_t>(low);
}

} // namespace

std::vector<uint16_t> free_ports(std::size_t count) {
    // Below the ephemeral range, from an offset of the process and the time, so that
    // test processes running at once, and calls one after the other, try different
    // ports first (a test that needs several at once asks for them in one call).
    constexpr unsigned kFirst = 10000;
    const unsigned end = first_ephemeral_port();
    if (end <= kFirst + count)
        throw std::runtime_error("free_ports: the ephemeral range leaves no ports below it");
    const unsigned span = end - kFirst;
    const auto now = std::chrono::steady_clock::now().time_since_epoch();
    const unsigned start =
        static_cast<unsigned>(::getpid()) * 7919u +
        static_cast<unsigned>(std::chrono::duration_cast<std::chrono::microseconds>(now).count());
    std::vector<UniqueFd> held;
    std::vector<uint16_t> ports;
    for (unsigned tried = 0; ports.size() < count && tried < span; ++tried) {
        const auto port = static_cast<uint16_t>(kFirst + (start + tried) % span);
        UniqueFd fd = new_socket(AF_INET);
        sockaddr_in sin{};
        sin.sin_family = AF_INET;
        sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        sin.sin_port = htons(port);
        if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sin), sizeof(sin)) != 0)
            continue; // in use
        held.push_back(std::move(fd));
        ports.push_back(port);
    }
    if (ports.size() < count)
        throw std::runtime_error("free_ports: no free port below the ephemeral range");
    return ports;
}

uint16_t free_port() {
    return free_ports(1).front();
}

bool ipv6_loopback_available() {
    UniqueFd fd{::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0)};
    if (!fd) {
        return false;
    }
    sockaddr_in6 sin6{};
    sin6.sin6_family = AF_INET6;
    sin6.sin6_addr = in6addr_loopback;
    return ::bind(fd.get(), reinterpret_cast<sockaddr*>(&sin6), sizeof(sin6)) == 0;
}

void shutdown_write(int fd) {
    ::shutdown(fd, SHUT_WR);
}

void abortive_close(UniqueFd& fd) {
    if (!fd) {
        return;
    }
    linger lg{1, 0};
    ::setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    fd.reset();
}

namespace {
bool same_address(const sockaddr_storage& a, socklen_t alen, const sockaddr_storage& b,
                  socklen_t blen) {
    return alen == blen && std::memcmp(&a, &b, alen) == 0;
}

} // namespace

std::optional<int> fd_connected_to(int peer_fd) {
    sockaddr_storage want{};
    socklen_t want_len = sizeof(want);
    if (::getsockname(peer_fd, reinterpret_cast<sockaddr*>(&want), &want_len) != 0)
        return std::nullopt;
    DIR* dir = ::opendir("/proc/self/fd");
    if (dir == nullptr)
        return std::nullopt;
    std::optional<int> found;
    while (dirent* entry = ::readdir(dir)) {
        int fd = std::atoi(entry->d_name);
        if (entry->d_name[0] == '.' || fd == peer_fd)
            continue;
        sockaddr_storage peer{};
        socklen_t len = sizeof(peer);
        if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) == 0 &&
            same_address(peer, len, want, want_len))
            found = fd;
    }
    ::closedir(dir);
    return found;
}

} // namespace uringfwd::test
