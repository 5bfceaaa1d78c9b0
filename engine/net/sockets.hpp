// Socket set-up done with plain syscalls: once per listener or per connection, never
// per byte.
#pragma once

#include "net/socket_address.hpp"
#include "net/unix_socket_file.hpp"
#include "uring/unique_fd.hpp"

#include <sys/types.h>

#include <cstdint>

#include <optional>
#include <string>

namespace uringfwd::engine {

using uring::UniqueFd;

// How a listening socket is set up beyond its address.
struct ListenSocketOptions {
    bool reuse_port = true; // TCP: SO_REUSEPORT, so every shard can own one
    bool v6_only = true;    // IPv6: IPV6_V6ONLY (false: v4-mapped clients too)
    bool mptcp = false;     // TCP: an IPPROTO_MPTCP socket, TCP where the kernel has none
    bool fastopen = false;  // TCP: TCP_FASTOPEN, a queue as long as the backlog
    // A Unix path's socket file, right after bind: chmod to `mode`, chown to `owner`
    // and `group` (each only when set).
    std::optional<mode_t> mode;
    std::optional<uid_t> owner;
    std::optional<gid_t> group;
    bool operator==(const ListenSocketOptions&) const = default;
};

// A listening socket, and the file its bind made for a Unix path (empty otherwise).
struct ListeningSocket {
    UniqueFd fd;
    OwnedSocketFile file;
    // Options asked for mptcp, but the kernel made no MPTCP socket: why (the socket is
    // TCP). Empty otherwise.
    std::string mptcp_fallback;
};

// A non-blocking listening socket. TCP listeners get SO_REUSEADDR and, when
// reuse_port, SO_REUSEPORT. A Unix path's file gets the options' mode and owner before
// listen(2), so no client meets other permissions. A Unix path taken by a socket
// file nobody accepts on (left by a process that ended) is replaced; a live socket or
// any other kind of file is an error, and left alone (clear_stale_socket()).
// Throws std::runtime_error("cannot listen on X: reason").
ListeningSocket open_listener(const SocketAddress& address, const ListenSocketOptions& options,
                              int backlog);

// A non-blocking, close-on-exec stream socket of the address's family, or an invalid
// fd with errno set.
UniqueFd open_stream_socket(const SocketAddress& address);

// socket(2)'s errno when the kernel cannot make an IPPROTO_MPTCP socket: EPROTONOSUPPORT
// without CONFIG_MPTCP, ENOPROTOOPT with net.mptcp.enabled = 0 (docs/kernel.md §12).
// Either means "use TCP"; any other errno is a real failure.
bool is_mptcp_missing(int err);

// An IPPROTO_MPTCP stream socket of the address's family (TCP families only); when the
// kernel has no MPTCP (is_mptcp_missing), a TCP one, with `fallback` set to why.
UniqueFd open_mptcp_socket(const SocketAddress& address, std::string& fallback);

// Small writes go out at once: splice already hands the kernel large chunks, and a
// forwarder must not add Nagle delay to request/response traffic. No-op on Unix sockets.
// Whether it could be set (a TCP socket).
bool set_no_delay(int fd);

// Whether this process may set SO_MARK to `mark` (it needs CAP_NET_ADMIN or CAP_NET_RAW): tried
// once on a socket of its own. "" when it may, else why not ("setsockopt(SO_MARK): Operation not
// permitted; it needs CAP_NET_ADMIN (or CAP_NET_RAW)").
std::string mark_problem(uint32_t mark);

// Whether this process may make transparent sockets (IP_TRANSPARENT needs CAP_NET_ADMIN
// or CAP_NET_RAW), tried as mark_problem() tries SO_MARK; "" when it may.
std::string transparent_problem();

// Makes a TCP socket of `family` transparent: IP_TRANSPARENT (IPv4) or
// IPV6_TRANSPARENT, so bind(2) takes an address this host does not have. 0 or an errno.
int set_transparent(int fd, int family);

// Makes close() send RST instead of FIN (SO_LINGER {1, 0}), so the peer learns the
// stream was cut rather than ended.
void set_reset_on_close(int fd);

// Connection steering for a shard's listener (docs/kernel.md §9). SO_INCOMING_CPU
// alone makes the kernel's reuseport hash prefer the listener of the receiving CPU;
// the classic BPF program, attached to any socket of the group, picks listener number
// (receiving CPU - base), which equals the shard index when shards sit on consecutive
// CPUs and listened in shard order. An index past the group falls back to the hash.
// Both return 0 or an errno.
int set_incoming_cpu(int fd, int cpu);
int attach_cpu_steering(int fd, int base_cpu);

// Where a socket is bound (for port 0) and who is on the other end (for log lines).
SocketAddress local_address(int fd);
std::string peer_name(int fd);
// The other end's address; nullopt when the socket has none (not connected).
std::optional<SocketAddress> peer_address(int fd);
// The other end as an Endpoint; empty (default) when the socket has none.
Endpoint peer_endpoint(int fd);

} // namespace uringfwd::engine
