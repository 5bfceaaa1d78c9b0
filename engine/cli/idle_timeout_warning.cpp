#include "cli/idle_timeout_warning.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

namespace uringfwd::cli {

std::string idle_timeout_warning(const EngineConfig& config, bool from_file) {
    std::vector<std::string> names;
    for (const RouteConfig& route : config.routes)
        if (route.idle_timeout.count() == 0)
            names.push_back(fmt::format("\"{}\"", route.name));
    if (names.empty())
        return {};
    const bool one = names.size() == 1;
    const std::string how =
        from_file ? fmt::format("set idle_timeout = \"10m\", say, or \"24h\" where connections "
                                "are quiet by design, in {} [[route]] section{}",
                                one ? "its" : "their", one ? "" : "s")
                  : std::string("give --idle-timeout 10m, say, or 24h where connections are "
                                "quiet by design");
    return fmt::format("{} {} {} no idle timeout: a client that goes silent holds its upstream "
                       "connection for ever; {}",
                       one ? "route" : "routes", fmt::join(names, ", "), one ? "has" : "have", how);
}

} // namespace uringfwd::cli
