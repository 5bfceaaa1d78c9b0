#include "routing/route_table.hpp"

#include <fmt/format.h>

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

std::shared_ptr<RouteTable> build_route_table(const EngineConfig& config) {
    auto table = std::make_shared<RouteTable>();
    for (const RouteConfig& rc : effective_routes(config)) {
        if (rc.listen.empty())
            throw std::runtime_error(fmt::format("route \"{}\": no listen address", rc.name));
        if (rc.pool.members.empty())
            throw std::runtime_error(fmt::format("route \"{}\": no upstream", rc.name));
        Route route;
        route.name = rc.name;
        route.pool = rc.pool;
        route.max_connections = rc.max_connections;
        route.idle_timeout = rc.idle_timeout;
        route.selector = rc.selector;
        route.inspect_timeout = rc.inspect_timeout;
        route.accept_proxy = rc.accept_proxy;
        route.proxy_tlvs = rc.proxy_tlvs;
        route.send_proxy = rc.send_proxy;
        for (const std::string& text : rc.trusted_sources) {
            std::string error;
            std::optional<Cidr> cidr = Cidr::parse(text, error);
            if (!cidr)
                throw std::runtime_error(
                    fmt::format("route \"{}\": trusted_sources: {}: {}", rc.name, text, error));
            route.trusted_sources.push_back(*cidr);
        }
        for (const Endpoint& e : rc.listen)
            route.listen.push_back(resolve(e));
        for (const UpstreamMember& m : rc.pool.members) {
            try {
                route.members.push_back({resolve_upstream(m.address), m.address.to_string(), -1,
                                         m.send_proxy.value_or(rc.send_proxy)});
            } catch (const std::exception& e) {
                throw std::runtime_error(fmt::format("route \"{}\": {}", rc.name, e.what()));
            }
        }
        table->routes.push_back(std::move(route));
    }
    return table;
}

void start_health_checks(RouteTable& table, const Logger& log) {
    std::vector<HealthTarget> targets;
    for (Route& route : table.routes) {
        if (!route.pool.health_check.enabled)
            continue;
        for (MemberRoute& member : route.members) {
            member.health_target = static_cast<int>(targets.size());
            targets.push_back({route.name, member.name, member.address, route.pool.health_check});
        }
    }
    if (targets.empty())
        return;
    table.health = std::make_shared<HealthChecker>(std::move(targets), log.with_prefix("health"));
    table.health->start();
}

} // namespace uringfwd::engine
