#include "cli/route_summary.hpp"

#include "uringfwd/messages.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace uringfwd::cli {
namespace {

using uringfwd::count_of;

std::string summarize(const RouteConfig& route) {
    std::string listen;
    for (const Endpoint& e : route.listen)
        listen += fmt::format("{}{}", listen.empty() ? "" : ", ", e.to_string());
    const auto& members = route.pool.members;
    const auto backups = static_cast<std::size_t>(
        std::count_if(members.begin(), members.end(), [](const auto& m) { return m.backup; }));
    std::string tls;
    for (const std::string& name : route.server_names)
        tls += fmt::format("{}{}", tls.empty() ? " for " : ", ", name);
    for (const std::string& protocol : route.alpn)
        tls += fmt::format("{}alpn {}", tls.empty() ? " for " : ", ", protocol);
    return fmt::format("{} on {}{} -> {}{}, {}", route.name, listen, tls,
                       count_of(members.size(), "upstream"),
                       backups > 0 ? fmt::format(" ({})", count_of(backups, "backup")) : "",
                       to_string(route.pool.balance));
}

} // namespace

std::string summarize_routes(const EngineConfig& config) {
    std::string out = count_of(config.routes.size(), "route") + ":";
    for (std::size_t i = 0; i < config.routes.size(); ++i)
        out += (i == 0 ? " " : "; ") + summarize(config.routes[i]);
    return out;
}

} // namespace uringfwd::cli
