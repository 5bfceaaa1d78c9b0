// Routes and upstream pools: what one engine serves. A route accepts clients on one or
// more listen addresses and forwards each to a member of its upstream pool, chosen by
// the pool's balancing policy among the members that are up.
#pragma once

#include "uringfwd/endpoint.hpp"
#include "uringfwd/observer.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace uringfwd {

enum class BalancePolicy {
    // Smooth weighted round-robin (as nginx does it): over any window, each member gets
    // its share of weight, spread out rather than in runs.
    RoundRobin,
    // The member with the fewest open connections relative to its weight. Counted per
    // shard: each shard balances its own connections.
    LeastActive,
    // Consistent hashing of the client's address with a Maglev lookup table: engines
    // with the same pool send the same client to the same member, and removing one of N
    // members moves about 1/N of the clients, mostly those that were on it (README,
    // "Balancing", says when more move).
    Maglev,
};
std::string_view to_string(BalancePolicy policy); // "round-robin", "least-active", "maglev"
std::optional<BalancePolicy> parse_balance_policy(std::string_view text);

// The PROXY protocol (HAProxy's doc/proxy-protocol.txt): a header before the stream
// that tells the next hop who the client is. See README "PROXY protocol".
enum class ProxyVersion { Off, V1, V2 };
std::string_view to_string(ProxyVersion version); // "off", "v1", "v2"
std::optional<ProxyVersion> parse_proxy_version(std::string_view text);

// PROXY v2 TLV types that can be passed on from an accepted header to one sent
// upstream (spec section 2.2): "alpn" (0x01), "authority" (0x02), "unique_id" (0x05),
// "ssl" (0x20), "netns" (0x30), or a number 0..255 ("0xE0" for a custom one).
std::optional<uint8_t> parse_proxy_tlv_type(std::string_view text);

// Why `text` is not a CIDR range as RouteConfig::trusted_sources takes them
// ("10.0.0.0/8", "::1/128", a bare address for one host; no bits set past the prefix),
// or "" when it is one.
std::string cidr_problem(std::string_view text);

// What a route does with the open connections of a member that goes down (its active
// health check fails it) or leaves the pool (Engine::remove_member(), a reload).
enum class OnMemberDown {
    Keep,  // they go on until they end (the default)
    Close, // they are reset, both sides, counted as closed_member_down (HAProxy
           // on-marked-down shutdown-sessions, Envoy close_connections_on_host_health_failure)
};
std::string_view to_string(OnMemberDown what); // "keep", "close"
std::optional<OnMemberDown> parse_on_member_down(std::string_view text);

// TCP keepalive on a connection's socket (SO_KEEPALIVE): after `idle` without a byte
// either way the kernel probes the peer every `interval`, and gives the connection up
// (a reset, the other side closed) after `count` probes unanswered. A field left unset
// keeps the kernel's default (net.ipv4.tcp_keepalive_time, _intvl, _probes: 7200 s,
// 75 s, 9). The kernel takes 1..32767 s for idle and interval and 1..127 probes
// (include/net/tcp.h MAX_TCP_KEEPIDLE, MAX_TCP_KEEPINTVL, MAX_TCP_KEEPCNT).
struct TcpKeepalive {
    std::optional<std::chrono::seconds> idle;     // TCP_KEEPIDLE
    std::optional<std::chrono::seconds> interval; // TCP_KEEPINTVL
    std::optional<unsigned> count;                // TCP_KEEPCNT
    bool operator==(const TcpKeepalive&) const = default;
};

struct UpstreamMember {
    Endpoint address;    // a host name is resolved at start (and every resolve_interval)
    unsigned weight = 1; // 1..1000
    // Used only while no primary member is up.
    bool backup = false;
    // Open connections to this member at most, all shards together (connects in
    // progress included); a full member is skipped. When every member a client may go
    // to is full, it waits for one (as HAProxy queues for a full server) up to the
    // pool's connect deadline, then is reset (closed_no_upstream). 0: no limit.
    std::size_t max_connections = 0;
    // A PROXY header to send to this member, overriding the route's send_proxy.
    std::optional<ProxyVersion> send_proxy = std::nullopt;
    // Names the member in metrics (the `upstream` label), logs, RouteStats and
    // MemberHealth, and is its Maglev key; letters, digits, '-', '_', '.'. Empty: the
    // address as written. Unique within the route, so two members may share an
    // address only under names of their own.
    std::string name = {};
    // Its own slow start, overriding the route's (RouteConfig::slow_start).
    std::optional<std::chrono::milliseconds> slow_start = std::nullopt;
    // Source addresses of the connections to this member, replacing the route's
    // (RouteConfig::source) when not empty.
    std::vector<std::string> source = {};
    // Connect to this member with MPTCP (IPPROTO_MPTCP): a member that does not speak it
    // answers as TCP and the connection is TCP (the kernel's fallback); a kernel that
    // cannot make the socket gets a TCP one and a warning (throttled). Such sockets are
    // plain fds even with direct descriptors: the fallback is decided by socket(2)'s
    // errno, at once, on the shard's thread.
    bool mptcp = false;
    // TCP_FASTOPEN_CONNECT on the sockets to this member: once the kernel holds a cookie
    // from it, the connect completes at once and the SYN leaves with the client's first
    // bytes (net.ipv4.tcp_fastopen bit 1, the kernel's default). So a refusal shows as a
    // reset on the first write (the client is reset, no failover), and a protocol whose
    // server speaks first waits for the client's first byte: for client-first protocols
    // only (README "TCP Fast Open").
    bool fastopen = false;
};

// Active health check: a TCP connect to each member every `interval`, run once per
// engine (not per shard). With `send`, those bytes are written after the connect and
// the reply must start with `expect`.
struct HealthCheck {
    bool enabled = false;
    std::chrono::milliseconds interval{2000};
    std::chrono::milliseconds timeout{1000};
    unsigned rise = 2; // consecutive successes that mark a down member up
    unsigned fall = 3; // consecutive failures that mark an up member down
    std::string send;
    std::string expect;
};

// Passive health: `fall` consecutive failed connects to a member mark it down for
// `backoff`, doubled at each further failure up to `max_backoff`; a successful connect
// marks it up. fall = 0 turns it off.
struct PassiveHealth {
    unsigned fall = 3;
    std::chrono::milliseconds backoff{1000};
    std::chrono::milliseconds max_backoff{30000};
};

struct UpstreamPool {
    std::vector<UpstreamMember> members;
    BalancePolicy balance = BalancePolicy::RoundRobin;
    // One connect attempt gives up after this long.
    std::chrono::milliseconds connect_timeout{5000};
    // Further members tried after a refused, unreachable or timed-out connect; all
    // attempts together stay within `connect_deadline` (0: retries + 1 connect timeouts).
    unsigned retries = 1;
    std::chrono::milliseconds connect_deadline{0};
    PassiveHealth passive;
    HealthCheck health_check;
    // Host names are looked up again this often (off the shard threads); 0: only at
    // start. A failed lookup keeps the last answer.
    std::chrono::milliseconds resolve_interval{0};
};

// What a route's selector decided for one new connection.
struct Selection {
    enum class Kind {
        Pool,    // let the pool's balancing policy choose (as without a selector)
        Member,  // this member of the pool (index into pool.members) first; its
                 // failover, if the connect fails, goes by the pool's policy
        Address, // an upstream outside the pool: an address literal (an IP or a Unix
                 // path; a host name would need a lookup, which may block), no failover
        Reject,  // reset the client (counted as closed_rejected)
    };
    Kind kind = Kind::Pool;
    std::size_t member = 0;
    Endpoint address;

    static Selection pool() { return {}; }
    static Selection of_member(std::size_t m) { return {Kind::Member, m, {}}; }
    static Selection of_address(Endpoint e) { return {Kind::Address, 0, std::move(e)}; }
    static Selection reject() { return {Kind::Reject, 0, {}}; }
};

// Chooses the upstream of each new connection of a route. Called on the shard thread
// that serves it, before anything is connected, with the connection's id, shard,
// route and addresses: it must not block (no lookups, no locks held for long, no I/O)
// and may be called by several shard threads at once, so what it reads must be
// thread-safe. It sees a ConnectionInfo whose route view is valid during the call only.
using UpstreamSelector = std::function<Selection(const ConnectionInfo&)>;

// Who may connect to the socket file of a Unix listen path, as HAProxy's `bind ... mode
// user group` and nginx's access to a socket say it. Applied to the file right after
// bind(2) and before listen(2), so no client ever meets other permissions; not to a
// socket inherited from systemd or an upgraded process (its file is not ours), nor to an
// abstract name (it has no file). Unset fields keep what bind gave: mode 0777 less the
// umask, the process's user and group.
struct UnixSocketAccess {
    std::optional<unsigned> mode; // permission bits, 0..0777 (0660: owner and group)
    std::string user;             // a user name or a numeric uid; "": unchanged
    std::string group;            // a group name or a numeric gid; "": unchanged
    bool empty() const { return !mode && user.empty() && group.empty(); }
    bool operator==(const UnixSocketAccess&) const = default;
};

struct RouteConfig {
    std::string name;
    std::vector<Endpoint> listen; // TCP v4/v6 and Unix; every shard serves each
    // listen_access[i] for listen[i], Unix paths only; shorter than listen (or empty):
    // the rest keep the defaults. Routes that share an address must agree on it.
    std::vector<UnixSocketAccess> listen_access;
    // An IPv6 listen address takes IPv4 clients too, as v4-mapped addresses
    // (IPV6_V6ONLY off): "[::]:443" alone then serves both families. Off (the default,
    // whatever net.ipv6.bindv6only says): an IPv6 address is IPv6 only, and IPv4 needs a
    // listen address of its own ("0.0.0.0:443", which a dual-stack [::]:443 would
    // collide with).
    bool dual_stack = false;
    UpstreamPool pool;
    // Open connections of the route at most, all shards together (one counter the
    // shards share on the admission path); at the limit its listeners stop accepting
    // (clients wait in the backlog) until one closes, on any shard. 0: no limit.
    std::size_t max_connections = 0;
    // No byte in either direction for this long closes both sides with FIN. 0: never.
    std::chrono::milliseconds idle_timeout{0};
    // A connection open longer than this (counted from its accept) is closed on both
    // sides with FIN, busy or not (closed_max_duration): long-lived connections would
    // otherwise pin a drained member for ever. Checked by the idle sweep, which then runs
    // at least every 250 ms, so the close comes within about 0.25 s of the deadline.
    // 0: never.
    std::chrono::milliseconds max_duration{0};
    // Empty: the pool's balancing policy chooses every upstream.
    UpstreamSelector selector;
    // TLS passthrough routing. Routes that list the same listen address share it: the
    // engine reads each client's TLS ClientHello (never terminating TLS) and serves it
    // on the route whose server_names ("a.example", "*.b.example": case-insensitive;
    // a wildcard matches one label deep or more) and alpn (one of the client's ALPN
    // protocols) match; exact names beat wildcards, the longest wildcard beats shorter
    // ones, and among routes matching the same way one whose alpn matches beats one
    // without alpn. The route of the address with neither list is its default: clients
    // that match nothing, send no server name or do not speak TLS. Without a default
    // they are reset (closed_no_route). A route alone on its address with neither list
    // reads nothing: its clients are never delayed.
    std::vector<std::string> server_names;
    std::vector<std::string> alpn;
    // Routes that read a preamble before choosing an upstream (a PROXY header, a TLS
    // ClientHello) give up on a client that has not sent it within this long: reset,
    // counted as closed_inspect_timeout. Routes that read none ignore it.
    std::chrono::milliseconds inspect_timeout{3000};

    // PROXY protocol. accept_proxy: every client of the route's listeners must start
    // with a v1 or v2 header (auto-detected); its addresses are what the selector, the
    // observer, the Maglev hash and a header sent upstream see. A client without one,
    // with a broken one, or too slow (inspect_timeout) is reset. Clients handed over
    // with Engine::forward are not read: the application owns what came before.
    bool accept_proxy = false;
    // CIDRs ("10.0.0.0/8", "::1/128") allowed to send a header; a client from
    // anywhere else is reset (closed_proxy_untrusted) before anything is read.
    // Empty: every source is trusted.
    std::vector<std::string> trusted_sources;
    // v2 TLV types of an accepted header passed on in a v2 header sent upstream
    // (parse_proxy_tlv_type); others are parsed and dropped.
    std::vector<uint8_t> proxy_tlvs;
    // A header sent to the upstream before any client byte (members may override).
    // Not for Engine::forward_pair: its upstream is the application's own connection.
    ProxyVersion send_proxy = ProxyVersion::Off;

    // Who may connect (README "Access lists and per-source limits"): CIDR ranges as
    // trusted_sources takes them, IPv4 and IPv6. Deny wins; with an allow list, every
    // client it does not name is denied. With accept_proxy the address judged is the
    // PROXY header's (from a trusted source). A client refused is reset before any
    // upstream work (closed_denied). A route that sets neither list takes both of the
    // engine's (EngineConfig::access), as nginx's allow/deny are inherited by a block
    // with none of its own.
    std::vector<std::string> allow;
    std::vector<std::string> deny;
    // How much one source may take, all shards together (one table for the engine,
    // EngineConfig::access.source_table_size): open connections at most, and new
    // connections per second (a token bucket of connection_burst_per_source, the rate
    // when 0). A source is the client's address cut to source_prefix_v4/v6 bits (IPv4
    // and IPv4-mapped clients by the first, IPv6 by the second). Over either limit the
    // client is reset before any upstream work (closed_source_limit). 0: no limit.
    std::size_t max_connections_per_source = 0;
    unsigned connection_rate_per_source = 0;
    unsigned connection_burst_per_source = 0;
    unsigned source_prefix_v4 = 32; // 1..32
    unsigned source_prefix_v6 = 64; // 1..128

    // Runtime control (uringfwd/runtime.hpp).
    OnMemberDown on_member_down = OnMemberDown::Keep;
    // A member that comes up (its health check passes again, passive health lets it
    // back, it is set Ready after Drain or Maint, or it is added) gets its share of new
    // connections step by step: its effective weight climbs from 0 to its weight,
    // linearly, over this long. 0: at once. Not for Maglev (refused): a lookup table
    // has no weight to ramp.
    std::chrono::milliseconds slow_start{0};

    // Socket controls (README "Socket controls"), set on each connection's sockets: the
    // client's right after its accept, the upstream's before its connect (so the SYN
    // already carries the mark and TOS). A value the socket refuses (it cannot happen
    // with validated values, short of a missing capability) is logged and the
    // connection goes on without it.
    // SO_KEEPALIVE and its timing; unset: no keepalive probes (the kernel's default).
    std::optional<TcpKeepalive> client_keepalive;
    std::optional<TcpKeepalive> upstream_keepalive;
    // TCP_USER_TIMEOUT: data unacknowledged this long (or keepalive probes unanswered,
    // with keepalive) gives the connection up. Whole milliseconds, 0..2^31-1 ms (the
    // kernel's int); 0: the kernel's retransmission rules alone.
    std::chrono::milliseconds client_user_timeout{0};
    std::chrono::milliseconds upstream_user_timeout{0};
    // SO_MARK on upstream sockets (policy routing, netfilter): needs CAP_NET_ADMIN (or,
    // since Linux 5.17, CAP_NET_RAW: net/core/sock.c sk_setsockopt()), which
    // Engine::start() and reconfigure() find missing by setting it once on a socket of
    // their own, before any connection (a clear error, never one failed connect each).
    std::optional<uint32_t> mark;
    // The TOS byte (DSCP << 2 | ECN) of upstream sockets, 0..255: IP_TOS on IPv4,
    // IPV6_TCLASS on IPv6. The kernel keeps the ECN bits of TCP sockets its own.
    std::optional<unsigned> tos;
    // Source addresses for upstream connections, IP literals ("192.0.2.10", "2001:db8::7"):
    // each upstream socket is bound to one before its connect, with
    // IP_BIND_ADDRESS_NO_PORT so the kernel still picks the port at connect (per
    // destination, not one port per source across every upstream). Several spread the
    // connections over them, round-robin per connection (per shard): one upstream then
    // takes more connections than one address's ephemeral ports allow. Only those of the
    // upstream's family are used, and a member left with none fails its connects (an
    // IPv4 upstream needs an IPv4 source). A bind that fails (the address is not on this
    // host) fails that connect attempt as a refused connect would: counted, failed over.
    // No io_uring bind for a socket in the ring's file table on this liburing: with a
    // source, upstream sockets are plain fds even with direct descriptors (docs/kernel.md
    // §11). A member's own list replaces this one (UpstreamMember::source).
    std::vector<std::string> source;
    // Multipath TCP (README "MPTCP"; docs/kernel.md §12): the route's TCP listeners are
    // IPPROTO_MPTCP sockets, so MPTCP clients get MPTCP and plain TCP clients plain TCP
    // (the kernel falls back per connection). A kernel without MPTCP, or with
    // net.mptcp.enabled = 0, gets TCP listeners and one warning. Both kinds of
    // connection splice (docs/kernel.md §12), so every data path serves them.
    // Connecting to a member over MPTCP is the member's own choice (UpstreamMember::mptcp).
    bool mptcp = false;
    // TCP Fast Open (RFC 7413) on the route's TCP listeners (TCP_FASTOPEN, a queue as
    // long as the listen backlog): a client with a cookie sends its first bytes in the
    // SYN and saves a round trip. The kernel serves it only with bit 2 of
    // net.ipv4.tcp_fastopen set (README "TCP Fast Open"); without it, clients get a plain
    // handshake. Fast Open toward a member is the member's own choice
    // (UpstreamMember::fastopen).
    bool fastopen = false;
    // Transparent proxying (README "Transparent proxying"): each upstream connection is
    // made *from the client's own address* (the PROXY header's with accept_proxy), so
    // the upstream sees the client without parsing a header: IP_TRANSPARENT (IPv6:
    // IPV6_TRANSPARENT) lets the socket bind an address this host does not have. Needs
    // CAP_NET_ADMIN (or CAP_NET_RAW: net/ipv4/ip_sockglue.c), which Engine::start() and
    // reconfigure() try once, and routing that brings the upstream's replies back to
    // this host (policy routing, README). Excludes `source`; a client of another family
    // than the member (or a Unix client) fails the attempt as a refused connect would.
    // Upstream sockets are plain fds then, as with a source (a bind).
    bool transparent = false;
};

// Why `text` is not a source address as RouteConfig::source takes them (an IPv4 or IPv6
// literal without a port), or "" when it is one.
std::string source_address_problem(std::string_view text);

} // namespace uringfwd
