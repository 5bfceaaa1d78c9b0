// Socket controls (RouteConfig: keepalive, user timeout, mark, TOS, source addresses) as
// what a socket is given: a list of (level, option, value) to set, worked out once per
// route and family when the route table is built, and the route's problems for
// validate(). Pure: nothing here touches a socket (the connector applies the lists:
// direct_sockets.hpp set_options()).
#pragma once

#include "net/socket_address.hpp"
#include "uringfwd/route.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace uringfwd::engine {

// The kernel's bounds (include/net/tcp.h): TCP_KEEPIDLE and TCP_KEEPINTVL take
// 1..MAX_TCP_KEEPIDLE / MAX_TCP_KEEPINTVL seconds, TCP_KEEPCNT 1..MAX_TCP_KEEPCNT;
// TCP_USER_TIMEOUT an int of milliseconds, not negative (net/ipv4/tcp.c).
inline constexpr std::chrono::seconds kMaxKeepaliveIdle{32767};
inline constexpr std::chrono::seconds kMaxKeepaliveInterval{32767};
inline constexpr unsigned kMaxKeepaliveCount = 127;
inline constexpr std::chrono::milliseconds kMaxUserTimeout{2147483647};

// One setsockopt(2). `value` is read by the kernel when a ring's setsockopt runs, after
// the call that submitted it has returned: an option lives in a list that outlives the
// connection (the route's, in the shared RouteTable).
struct SocketOption {
    int level = 0;
    int name = 0;
    int value = 0;
    std::string_view what; // "TCP_KEEPIDLE", for messages
    bool operator==(const SocketOption& o) const {
        return level == o.level && name == o.name && value == o.value;
    }
};

// What one side of a route's connections (the client's socket, or the upstream's) asks.
struct SocketControls {
    std::optional<TcpKeepalive> keepalive;
    std::chrono::milliseconds user_timeout{0};
    std::optional<uint32_t> mark;
    std::optional<unsigned> tos;
};
SocketControls client_controls(const RouteConfig& route);   // keepalive, user timeout
SocketControls upstream_controls(const RouteConfig& route); // and mark, tos

// The options for a TCP socket of `family` (AF_INET or AF_INET6), in the order they are
// set: SO_KEEPALIVE, then its timing, TCP_USER_TIMEOUT, SO_MARK, IP_TOS / IPV6_TCLASS.
// None for any other family (a Unix socket has none of them). Values must be valid
// (socket_control_problems() finds none).
std::vector<SocketOption> socket_options(const SocketControls& controls, int family);

// Both families' lists, made once: an upstream's family is known only at its connect
// (a host name may resolve to either).
struct FamilyOptions {
    std::vector<SocketOption> inet4;
    std::vector<SocketOption> inet6;
    // The list for a socket of `family`; an empty one for AF_UNIX.
    const std::vector<SocketOption>& of(int family) const;
};
FamilyOptions family_options(const SocketControls& controls);

// An IPv4 or IPv6 literal without a port, as a bind(2) address with port 0; nullopt
// with `error` set otherwise.
std::optional<SocketAddress> parse_source_address(std::string_view text, std::string& error);

// Round-robin over the addresses of `family` in `sources`: the one for the `turn`-th
// connection, nullptr when none is of that family.
const SocketAddress* pick_source(const std::vector<SocketAddress>& sources, int family,
                                 uint64_t turn);

// What validate() refuses in a route's socket controls, one message each (without the
// route's name): values out of the kernel's ranges, sources that are no IP literals or
// are given for Unix upstreams.
std::vector<std::string> socket_control_problems(const RouteConfig& route);

} // namespace uringfwd::engine
