#include "net/sockets.hpp"

#include <linux/filter.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iterator>
#include <stdexcept>
#include <string_view>

#include <fmt/format.h>

namespace uringfwd::engine {

namespace {
// The path of a Unix address bound in the filesystem; empty for the abstract namespace.
std::string unix_path(const SocketAddress& address) {
    auto* un = reinterpret_cast<const sockaddr_un*>(&address.storage);
    if (address.family() != AF_UNIX || un->sun_path[0] == '\0')
        return {};
    return std::string(un->sun_path, strnlen(un->sun_path, sizeof(un->sun_path)));
}

int enable(int fd, int level, int option) {
    int one = 1;
    return ::setsockopt(fd, level, option, &one, sizeof(one));
}
} // namespace

ListeningSocket open_listener(const SocketAddress& address, const ListenSocketOptions& options,
                              int backlog) {
    const std::string shown = to_endpoint(address).to_string();
    auto fail_with = [&](int err, const std::string& what) -> ListeningSocket {
        throw std::runtime_error(
            fmt::format("cannot listen on {}: {}{}", shown, what, std::strerror(err)));
    };
    auto fail = [&](const char* what) {
        const int err = errno;
        return fail_with(err, what);
    };
    ListeningSocket out;
    if (options.mptcp && address.family() != AF_UNIX)
        out.fd = open_mptcp_socket(address, out.mptcp_fallback);
    else
        out.fd.reset(::socket(address.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!out.fd)
        return fail("socket: ");
    const int fd = out.fd.get();
    if (address.family() != AF_UNIX) {
        if (enable(fd, SOL_SOCKET, SO_REUSEADDR) != 0)
            return fail("SO_REUSEADDR: ");
        if (options.reuse_port && enable(fd, SOL_SOCKET, SO_REUSEPORT) != 0)
            return fail("SO_REUSEPORT: ");
        // Set either way: the system's default (net.ipv6.bindv6only) must not decide
        // whether [::] takes IPv4 clients.
        int v6_only = options.v6_only ? 1 : 0;
        if (address.family() == AF_INET6 &&
            ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6_only, sizeof(v6_only)) != 0)
            return fail("IPV6_V6ONLY: ");
    }
    const std::string path = unix_path(address);
    // A Unix path's file is replaced only when it is a socket nobody accepts on;
    // anything else throws.
    const int rc =
        path.empty() ? ::bind(fd, address.get(), address.length) : bind_unix_path(fd, path, shown);
    if (rc != 0)
        return fail("");
    if (!path.empty()) {
        out.file = OwnedSocketFile(path); // removed again if anything below fails
        // By path: a socket's fd has no say over its file (fchmod(2) on it changes the
        // socket's own inode). The file was identified a moment ago; only a process
        // that may write to the directory could swap it in between.
        if (options.mode && ::chmod(path.c_str(), *options.mode) != 0) {
            const int err = errno;
            return fail_with(err, fmt::format("chmod {:04o}: ", *options.mode));
        }
        if ((options.owner || options.group) &&
            ::lchown(path.c_str(), options.owner.value_or(static_cast<uid_t>(-1)),
                     options.group.value_or(static_cast<gid_t>(-1))) != 0) {
            const int err = errno;
            const auto id = [](const auto& v) { return v ? fmt::format("{}", *v) : std::string(); };
            return fail_with(err,
                             fmt::format("chown to {}:{}: ", id(options.owner), id(options.group)));
        }
    }
    // Before listen(2): the kernel sizes the Fast Open queue of a listener it sets up
    // (net/ipv4/tcp.c do_tcp_setsockopt TCP_FASTOPEN, fastopen_queue_tune()).
    if (options.fastopen && address.family() != AF_UNIX &&
        ::setsockopt(fd, IPPROTO_TCP, TCP_FASTOPEN, &backlog, sizeof(backlog)) != 0)
        return fail("TCP_FASTOPEN: ");
    if (::listen(fd, backlog) != 0)
        return fail("listen: ");
    return out;
}

UniqueFd open_stream_socket(const SocketAddress& address) {
    return UniqueFd(::socket(address.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
}

bool is_mptcp_missing(int err) {
    return err == EPROTONOSUPPORT || err == ENOPROTOOPT;
}

UniqueFd open_mptcp_socket(const SocketAddress& address, std::string& fallback) {
    constexpr int kType = SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC;
    UniqueFd fd(::socket(address.family(), kType, IPPROTO_MPTCP));
    if (fd.valid() || !is_mptcp_missing(errno))
        return fd;
    fallback = fmt::format("socket(IPPROTO_MPTCP): {}{}", std::strerror(errno),
                           errno == ENOPROTOOPT ? " (net.mptcp.enabled = 0)"
                                                : " (a kernel without MPTCP)");
    return UniqueFd(::socket(address.family(), kType, 0));
}

bool set_no_delay(int fd) {
    return enable(fd, IPPROTO_TCP, TCP_NODELAY) == 0;
}

namespace {
// Tries an option that needs CAP_NET_ADMIN or CAP_NET_RAW once, on a TCP socket of its
// own (IPv4, or IPv6 on a host without it): `apply(fd, family)` sets it and returns 0
// or an errno. "" when it could be set, else why not, naming `option`.
template <typename Apply> std::string capability_problem(std::string_view option, Apply apply) {
    int family = AF_INET;
    UniqueFd probe(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!probe.valid()) { // a host without IPv4
        family = AF_INET6;
        probe.reset(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    }
    if (!probe.valid())
        return fmt::format("cannot open a socket to try {} on: {}", option, std::strerror(errno));
    const int err = apply(probe.get(), family);
    if (err == 0)
        return {};
    return fmt::format("setsockopt({}): {}{}", option, std::strerror(err),
                       err == EPERM ? "; it needs CAP_NET_ADMIN (or CAP_NET_RAW)" : "");
}
} // namespace

std::string mark_problem(uint32_t mark) {
    return capability_problem("SO_MARK", [mark](int fd, int) {
        const int value = static_cast<int>(mark);
        return ::setsockopt(fd, SOL_SOCKET, SO_MARK, &value, sizeof(value)) == 0 ? 0 : errno;
    });
}

int set_transparent(int fd, int family) {
    const bool v6 = family == AF_INET6;
    return enable(fd, v6 ? SOL_IPV6 : SOL_IP, v6 ? IPV6_TRANSPARENT : IP_TRANSPARENT) == 0 ? 0
                                                                                           : errno;
}

std::string transparent_problem() {
    return capability_problem("IP_TRANSPARENT", set_transparent);
}

void set_reset_on_close(int fd) {
    linger lin{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &lin, sizeof(lin));
}

int set_incoming_cpu(int fd, int cpu) {
    return ::setsockopt(fd, SOL_SOCKET, SO_INCOMING_CPU, &cpu, sizeof(cpu)) == 0 ? 0 : errno;
}

int attach_cpu_steering(int fd, int base_cpu) {
    sock_filter code[] = {
        // A = the CPU that is processing the SYN
        {BPF_LD | BPF_W | BPF_ABS, 0, 0, static_cast<uint32_t>(SKF_AD_OFF + SKF_AD_CPU)},
        // A -= base (wraps to a huge index for CPUs below base: falls back to the hash)
        {BPF_ALU | BPF_SUB | BPF_K, 0, 0, static_cast<uint32_t>(base_cpu)},
        // return A as the index of the listener in the reuseport group
        {BPF_RET | BPF_A, 0, 0, 0},
    };
    sock_fprog program{static_cast<unsigned short>(std::size(code)), code};
    return ::setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &program, sizeof(program)) == 0
               ? 0
               : errno;
}

SocketAddress local_address(int fd) {
    SocketAddress out;
    out.length = sizeof(out.storage);
    if (::getsockname(fd, out.get(), &out.length) != 0)
        out.length = 0;
    return out;
}

std::optional<SocketAddress> peer_address(int fd) {
    SocketAddress peer;
    peer.length = sizeof(peer.storage);
    if (::getpeername(fd, peer.get(), &peer.length) != 0)
        return std::nullopt;
    return peer;
}

Endpoint peer_endpoint(int fd) {
    std::optional<SocketAddress> peer = peer_address(fd);
    return peer ? to_endpoint(*peer) : Endpoint{};
}

std::string peer_name(int fd) {
    std::optional<SocketAddress> peer = peer_address(fd);
    if (!peer)
        return "?";
    if (peer->family() == AF_UNIX)
        return "unix peer";
    return to_endpoint(*peer).to_string();
}

} // namespace uringfwd::engine
