// The socket controls of a [[route]] (README "Socket controls"): client_keepalive,
// upstream_keepalive, client_user_timeout, upstream_user_timeout, mark, tos, source; and
// a [[route.upstream]]'s own source. Each bad value is an error at its line.
#pragma once

#include "config/error_list.hpp"
#include "config/table_reader.hpp"
#include "uringfwd/route.hpp"

#include <string>
#include <vector>

namespace uringfwd::config {

// Reads the route-level keys into `route` (`context` starts every message).
void read_socket_controls(TableReader& reader, const std::string& context, ErrorList& errors,
                          RouteConfig& route);

// source = "ADDR" or ["A", "B"]: IP literals, into `out`.
void read_source(TableReader& reader, std::vector<std::string>& out);

} // namespace uringfwd::config
