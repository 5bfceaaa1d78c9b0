#include "routing/route_table.hpp"

#include "platform/accounts.hpp"
#include "routing/hash.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <stdexcept>

namespace uringfwd::engine {

std::vector<RouteConfig> effective_routes(const EngineConfig& config) {
    if (!config.routes.empty())
        return config.routes;
    RouteConfig route;
    route.name = "default";
    route.listen = {config.listen};
    route.pool.members = {UpstreamMember{config.upstream}};
    route.pool.connect_timeout = config.connect_timeout;
    return {route};
}

namespace {

bool shareable_same(const SocketAddress& a, const SocketAddress& b) {
    if (a.length != b.length || std::memcmp(&a.storage, &b.storage, a.length) != 0)
        return false;
    // Port 0 asks for a port of its own each time.
    return a.family() == AF_UNIX || to_endpoint(a).port != 0;
}

// Routes that list the same address share one listener, which chooses among them by
// the ClientHello (routing/sni_router.hpp).
void group_listeners(RouteTable& table) {
    for (std::size_t r = 0; r < table.routes.size(); ++r) {
        for (const ListenAddress& listen : table.routes[r].listen) {
            const SocketAddress& address = listen.address;
            auto group =
                std::find_if(table.groups.begin(), table.groups.end(), [&](const ListenGroup& g) {
                    return shareable_same(g.address, address);
                });
            if (group == table.groups.end()) {
                table.groups.push_back({address, listen.options, {r}, r, nullptr});
                continue;
            }
            if (std::find(group->routes.begin(), group->routes.end(), r) != group->routes.end())
                throw std::runtime_error(fmt::format("route \"{}\": {} is listed twice",
                                                     table.routes[r].name,
                                                     to_endpoint(address).to_string()));
            // One socket serves them all: it can be set up one way only.
            if (!(group->options == listen.options))
                throw std::runtime_error(fmt::format(
                    "route \"{}\": listen address {} is set up otherwise (mode, user, group, "
                    "dual_stack, mptcp, fastopen) by route \"{}\", which shares it",
                    table.routes[r].name, to_endpoint(address).to_string(),
                    table.routes[group->routes.front()].name));
            group->routes.push_back(r);
        }
    }
    for (ListenGroup& group : table.groups) {
        std::vector<SniRule> rules;
        for (std::size_t r : group.routes)
            rules.push_back(
                {r, table.routes[r].name, table.routes[r].server_names, table.routes[r].alpn});
        auto router = std::make_shared<SniRouter>(std::move(rules));
        if (auto problems = router->problems(); !problems.empty())
            throw std::runtime_error(fmt::format(
                "listen address {}: {}", to_endpoint(group.address).to_string(), problems.front()));
        group.anchor = router->default_route().value_or(group.routes.front());
        if (router->needs_client_hello())
            group.router = std::move(router);
    }
}

// The counter of a limit: the previous table's for the same route (or member), so the
// connections it counts go on counting (its value changes once the table is in use:
// apply_limits()), or a new one.
std::shared_ptr<SharedLimit> limit_for(const std::shared_ptr<SharedLimit>* kept, std::size_t limit,
                                       std::size_t shards) {
    if (kept == nullptr || !*kept)
        return std::make_shared<SharedLimit>(limit, shards);
    return *kept;
}

const Route* route_named(const RouteTable* table, const std::string& name) {
    if (table == nullptr)
        return nullptr;
    for (const Route& route : table->routes)
        if (route.name == name)
            return &route;
    return nullptr;
}

const MemberRoute* member_named(const Route* route, const std::string& name) {
    if (route == nullptr)
        return nullptr;
    for (const MemberRoute& member : route->members)
        if (member.name == name)
            return &member;
    return nullptr;
}

// Its access list (its own, or the engine's when it has neither list) and per-source
// rule. value(): route_problems() refused an entry that does not parse.
void set_edge_rules(const EngineConfig& config, const RouteConfig& rc, Route& route) {
    const bool own = !rc.allow.empty() || !rc.deny.empty();
    std::string error;
    route.access = AccessList::parse(own ? rc.allow : config.access.allow,
                                     own ? rc.deny : config.access.deny, error)
                       .value();
    route.source_rule.max_open = static_cast<uint32_t>(rc.max_connections_per_source);
    route.source_rule.rate = rc.connection_rate_per_source;
    route.source_rule.burst = rc.connection_burst_per_source;
    route.source_rule.prefix_v4 = rc.source_prefix_v4;
    route.source_rule.prefix_v6 = rc.source_prefix_v6;
    route.source_route = mix64(fnv1a64(rc.name));
}

// route_problems() refused any that is no IP literal.
std::vector<SocketAddress> source_addresses(const std::vector<std::string>& texts) {
    std::vector<SocketAddress> out;
    std::string error;
    for (const std::string& text : texts)
        out.push_back(parse_source_address(text, error).value());
    return out;
}

} // namespace

std::shared_ptr<RouteTable> build_route_table(const EngineConfig& config, std::size_t shards,
                                              const RouteTable* previous) {
    auto table = std::make_shared<RouteTable>();
    for (const RouteConfig& rc : effective_routes(config)) {
        Route route;
        route.name = rc.name;
        route.pool = rc.pool;
        route.max_connections = rc.max_connections;
        route.idle_timeout = rc.idle_timeout;
        route.max_duration = rc.max_duration;
        route.selector = rc.selector;
        route.server_names = rc.server_names;
        route.alpn = rc.alpn;
        route.inspect_timeout = rc.inspect_timeout;
        route.accept_proxy = rc.accept_proxy;
        route.proxy_tlvs = rc.proxy_tlvs;
        route.send_proxy = rc.send_proxy;
        route.on_member_down = rc.on_member_down;
        route.client_options = family_options(client_controls(rc));
        route.upstream_options = family_options(upstream_controls(rc));
        route.source = source_addresses(rc.source);
        route.transparent = rc.transparent;
        route.plain_upstreams = rc.transparent;
        if (rc.transparent) {
            if (const std::string why = transparent_problem(); !why.empty())
                throw std::runtime_error(
                    fmt::format("route \"{}\": transparent = true: {}", rc.name, why));
        }
        if (rc.mark) {
            // Found once here rather than as one failed setsockopt per connection.
            if (const std::string why = mark_problem(*rc.mark); !why.empty())
                throw std::runtime_error(
                    fmt::format("route \"{}\": mark = {}: {}", rc.name, *rc.mark, why));
        }
        for (const std::string& text : rc.trusted_sources) {
            std::string error;
            // value(): route_problems() refused a range that does not parse.
            route.trusted_sources.push_back(Cidr::parse(text, error).value());
        }
        set_edge_rules(config, rc, route);
        for (std::size_t i = 0; i < rc.listen.size(); ++i) {
            const Endpoint& e = rc.listen[i];
            ListenAddress listen{resolve(e), {}};
            listen.options.v6_only = !(rc.dual_stack && e.kind == Endpoint::Kind::Inet6);
            listen.options.mptcp = rc.mptcp && e.kind != Endpoint::Kind::Unix;
            listen.options.fastopen = rc.fastopen && e.kind != Endpoint::Kind::Unix;
            // route_problems() refused access settings for anything but a socket file.
            if (i < rc.listen_access.size() && !rc.listen_access[i].empty()) {
                try {
                    const ListenSocketOptions access = listen_options(rc.listen_access[i]);
                    listen.options.mode = access.mode;
                    listen.options.owner = access.owner;
                    listen.options.group = access.group;
                } catch (const std::exception& error) {
                    throw std::runtime_error(fmt::format("route \"{}\": listen {}: {}", rc.name,
                                                         e.to_string(), error.what()));
                }
            }
            route.listen.push_back(listen);
        }
        const Route* before = route_named(previous, rc.name);
        route.limit = limit_for(before ? &before->limit : nullptr, rc.max_connections, shards);
        for (const UpstreamMember& m : rc.pool.members) {
            // Unique within the route: route_problems() refused two alike.
            std::string label = m.name.empty() ? m.address.to_string() : m.name;
            try {
                MemberRoute member;
                member.address = resolve_upstream(m.address);
                member.name = std::move(label);
                member.send_proxy = m.send_proxy.value_or(rc.send_proxy);
                member.source = m.source.empty() ? route.source : source_addresses(m.source);
                route.members.push_back(std::move(member));
            } catch (const std::exception& e) {
                throw std::runtime_error(fmt::format("route \"{}\": {}", rc.name, e.what()));
            }
            MemberRoute& added = route.members.back();
            const MemberRoute* kept = member_named(before, added.name);
            added.limit = limit_for(kept ? &kept->limit : nullptr, m.max_connections, shards);
            added.slow_start = m.slow_start.value_or(rc.slow_start);
            added.mptcp = m.mptcp && !m.address.is_unix();
            if (m.fastopen && !m.address.is_unix())
                added.connect_options.push_back(
                    {IPPROTO_TCP, TCP_FASTOPEN_CONNECT, 1, "TCP_FASTOPEN_CONNECT"});
            route.plain_upstreams = route.plain_upstreams || !added.source.empty() || added.mptcp;
            if (kept != nullptr)
                added.ramp_from = kept->ramp_from; // a ramp under way goes on
            else if (before != nullptr)
                added.ramp_from = std::chrono::steady_clock::now(); // new to a running route
        }
        table->routes.push_back(std::move(route));
    }
    group_listeners(*table);
    table->sources = previous != nullptr ? previous->sources : nullptr;
    const bool limited = std::any_of(table->routes.begin(), table->routes.end(),
                                     [](const Route& r) { return r.source_rule.active(); });
    if (limited && !table->sources)
        // A random seed: which bucket a source lands in is not for clients to aim at.
        table->sources = std::make_shared<SourceTable>(config.access.source_table_size,
                                                       uint64_t{std::random_device{}()} << 32 |
                                                           std::random_device{}());
    return table;
}

ListenSocketOptions listen_options(const UnixSocketAccess& access) {
    ListenSocketOptions out;
    if (access.mode) // at most 0777: route_problems() refused more
        out.mode = static_cast<mode_t>(*access.mode);
    if (!access.user.empty())
        out.owner = lookup_user(access.user);
    if (!access.group.empty())
        out.group = lookup_group(access.group);
    return out;
}

void apply_limits(const RouteTable& table) {
    for (const Route& route : table.routes) {
        route.limit->set_limit(route.max_connections);
        for (std::size_t m = 0; m < route.members.size(); ++m)
            route.members[m].limit->set_limit(route.pool.members[m].max_connections);
    }
}

void start_health_checks(RouteTable& table, const Logger& log, HealthChecker::OnChange on_change) {
    std::vector<HealthTarget> targets;
    for (Route& route : table.routes) {
        if (!route.pool.health_check.enabled)
            continue;
        for (MemberRoute& member : route.members) {
            member.health_target = static_cast<int>(targets.size());
            targets.push_back({route.name, member.name, member.address, route.pool.health_check,
                               true, member.state == MemberState::Maint});
        }
    }
    if (targets.empty())
        return;
    table.health = std::make_shared<HealthChecker>(std::move(targets), log.with_prefix("health"),
                                                   std::move(on_change));
    table.health->start();
}

} // namespace uringfwd::engine
