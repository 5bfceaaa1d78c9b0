// One [[route]] with its [[route.upstream]] members and health settings.
#pragma once

#include "config/error_list.hpp"
#include "uringfwd/route.hpp"

#include <toml++/toml.h>

#include <cstddef>
#include <string>
#include <vector>

namespace uringfwd::config {

// A route as read, with what the checks across routes need to name and place it.
struct ParsedRoute {
    RouteConfig route;
    // How messages name it: `route "web"`, or `route #2` when it has no valid name.
    std::string label;
    bool named = false;
    std::size_t line = 0;                  // its [[route]] header
    std::size_t name_line = 0;             // valid when named
    std::vector<std::size_t> listen_lines; // one per route.listen entry
    std::vector<std::size_t> member_lines; // one per pool member: its address
    std::size_t tls_line = 0;              // server_names (or alpn) when given
};

// `index` is the route's 1-based position in the file, its name when it has none.
ParsedRoute read_route(const toml::table& table, std::size_t index, ErrorList& errors);

} // namespace uringfwd::config
