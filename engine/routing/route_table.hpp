// The routes an engine serves, with every address resolved: built once at start (and
// again on reload) from EngineConfig, then shared read-only by every shard. Each shard
// keeps its own per-route state (counts, balancing, health) beside it.
#pragma once

#include "health/health_checker.hpp"
#include "net/cidr.hpp"
#include "net/socket_address.hpp"
#include "net/socket_controls.hpp"
#include "net/sockets.hpp"
#include "routing/access_list.hpp"
#include "routing/shared_limit.hpp"
#include "routing/sni_router.hpp"
#include "routing/source_limits.hpp"
#include "support/logger.hpp"
#include "uringfwd/config.hpp"
#include "uringfwd/runtime.hpp"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace uringfwd::engine {

struct MemberRoute {
    SocketAddress address;  // resolved
    std::string name;       // its name, or its address as configured ("host:port"): logs, stats,
                            // metrics, the Maglev key; unique within the route
    int health_target = -1; // its HealthChecker target, -1 when its pool has no check
    ProxyVersion send_proxy = ProxyVersion::Off; // its own, or the route's
    // Its max_connections, counted by every shard (never null).
    std::shared_ptr<SharedLimit> limit;
    // Runtime control (uringfwd/runtime.hpp): the operator's state it starts with on
    // every shard (kept across a reload by the engine), its slow start (its own or the
    // route's) and when that ramp began (a member a reload or add_member brought in;
    // epoch: none).
    MemberState state = MemberState::Ready;
    std::optional<unsigned> runtime_weight; // set at runtime, over pool.members' weight
    std::chrono::milliseconds slow_start{0};
    std::chrono::steady_clock::time_point ramp_from{};
    // Where its connections are bound before connecting: its own source addresses, or
    // the route's (RouteConfig::source); empty: the kernel chooses.
    std::vector<SocketAddress> source;
    bool mptcp = false; // connect with IPPROTO_MPTCP (UpstreamMember::mptcp)
    // Set on its TCP sockets after the route's upstream options, before the connect
    // (UpstreamMember::fastopen: TCP_FASTOPEN_CONNECT). Lives as long as the table, as a
    // ring's setsockopt needs (net/socket_controls.hpp SocketOption).
    std::vector<SocketOption> connect_options;
};

// A listen address of a route, resolved, with how its socket is set up (user and
// group names looked up).
struct ListenAddress {
    SocketAddress address; // port 0 until the first shard binds
    ListenSocketOptions options;
};

struct Route {
    std::string name;
    std::vector<ListenAddress> listen;
    std::vector<MemberRoute> members; // in configuration order, as pool.members
    UpstreamPool pool;                // the configuration (policy, timeouts, health)
    std::size_t max_connections = 0;  // engine-wide, as configured
    // max_connections, counted by every shard (never null); kept across reloads for a
    // route of the same name, so connections opened before one still count.
    std::shared_ptr<SharedLimit> limit;
    std::chrono::milliseconds idle_timeout{0};
    std::chrono::milliseconds max_duration{0}; // RouteConfig::max_duration
    UpstreamSelector selector;                 // empty: the pool's policy alone
    std::vector<std::string> server_names;
    std::vector<std::string> alpn;
    std::chrono::milliseconds inspect_timeout{3000};
    // PROXY protocol (RouteConfig): trusted_sources parsed.
    bool accept_proxy = false;
    std::vector<Cidr> trusted_sources;
    std::vector<uint8_t> proxy_tlvs;
    ProxyVersion send_proxy = ProxyVersion::Off; // for an address the selector chose
    OnMemberDown on_member_down = OnMemberDown::Keep;
    // Who may connect: its own allow/deny, or the engine's when it sets neither.
    AccessList access;
    // Its per-source limits (inactive: none), counted in RouteTable::sources under
    // source_route, its name hashed (the same after a reload, so counts go on).
    SourceRule source_rule;
    uint64_t source_route = 0;
    // Socket controls (RouteConfig) as the options set on each socket. Made once here,
    // where they outlive every connection of the route: a setsockopt through the ring
    // reads its value after the call that submitted it has returned.
    FamilyOptions client_options;
    FamilyOptions upstream_options;
    std::vector<SocketAddress> source; // for an address the selector chose
    // It or a member has a source, it is transparent or a member is MPTCP: its upstream
    // sockets are plain fds even with direct descriptors (UpstreamConnector::connect_to()),
    // and count against the fd limit.
    bool plain_upstreams = false;
    bool transparent = false; // RouteConfig::transparent
};

// One listen address and the routes that share it (most often one).
struct ListenGroup {
    SocketAddress address;
    ListenSocketOptions options;     // every route of the group asks for the same
    std::vector<std::size_t> routes; // indexes into RouteTable::routes, in table order
    // The route whose listeners accept the group's clients (its limit holds them back):
    // the default route (no server_names, no alpn), or the first when there is none.
    std::size_t anchor = 0;
    // Chooses among `routes` by the ClientHello; null when no route of the group
    // matches on names or ALPN, so nothing is read before connecting.
    std::shared_ptr<const SniRouter> router;
};

struct RouteTable {
    std::vector<Route> routes;
    // One per distinct listen address (TCP port 0 is never shared: each is its own).
    std::vector<ListenGroup> groups;
    // Checks the members of pools with a health_check (null when none has one); lives
    // as long as the table, so a connection of a replaced route still reads it.
    std::shared_ptr<HealthChecker> health;
    // The engine's one per-source table (EngineConfig::access.source_table_size): every
    // shard counts in it, and a reload keeps it, so one source's open connections are
    // counted once whatever shard or table they came through. Null until a route has
    // per-source limits.
    std::shared_ptr<SourceTable> sources;
};

// The routes of `config`: its `routes`, or one route "default" built from its listen,
// upstream and connect_timeout fields when `routes` is empty. Resolves every address
// (getaddrinfo: may block, so never on a shard) and every user and group of a Unix
// listener (NSS). Throws std::runtime_error with a one-line message naming the route
// and address that failed, or the first ambiguity of routes sharing an address
// (SniRouter::problems(), or socket options that differ). The routes must have passed
// route_problems() (api/validate.hpp), which this does not check again. `shards`: how
// many shards count the limits. `previous`: the table being replaced, whose limits a
// route of the same name (and its members of the same name) keep; their values change
// only with apply_limits(), once the new table is in use. A member new to a route
// `previous` has starts its slow start now. Its per-source table (RouteTable::sources)
// is kept whatever the routes.
std::shared_ptr<RouteTable> build_route_table(const EngineConfig& config, std::size_t shards,
                                              const RouteTable* previous = nullptr);

// Gives every limit of `table` its configured value (after a reload has been applied:
// kept counters still have the old one).
void apply_limits(const RouteTable& table);

// Creates and starts the table's health checker when a pool asks for checks.
// Throws std::runtime_error when its ring cannot be set up.
// `on_change`: told of every verdict that changes (HealthChecker::OnChange).
void start_health_checks(RouteTable& table, const Logger& log,
                         HealthChecker::OnChange on_change = {});

// The socket options of a Unix listener's access settings, users and groups looked up
// (lookup_user(), lookup_group()). Throws std::runtime_error naming the one not found.
ListenSocketOptions listen_options(const UnixSocketAccess& access);

// The routes `config` describes, with the single-route shorthand expanded.
std::vector<RouteConfig> effective_routes(const EngineConfig& config);

} // namespace uringfwd::engine
