// The keys of who may connect and how much one source may take (issue 23): allow and
// deny in [engine] (the routes' default) and in [[route]], the per-source limits of a
// route, and [engine] source_table_size. README "Access lists and per-source limits".
#pragma once

#include "config/table_reader.hpp"
#include "uringfwd/config.hpp"
#include "uringfwd/route.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace uringfwd::config {

// An array of CIDR ranges at `key` (allow, deny, trusted_sources) into `out`: a range that
// is none reported as "KEY: \"TEXT\": why" at its own line, a value of another type as
// not `array_what` / `item_what`.
void read_cidr_list(TableReader& reader, std::string_view key, std::vector<std::string>& out,
                    std::string_view array_what, std::string_view item_what);

// allow and deny: arrays of CIDR ranges, a bad entry reported at its own line.
void read_access_lists(TableReader& reader, std::vector<std::string>& allow,
                       std::vector<std::string>& deny);

// max_connections_per_source, connection_rate_per_source ("10/s"),
// connection_burst_per_source, source_prefix_v4, source_prefix_v6.
void read_source_limits(TableReader& reader, RouteConfig& route);

// [engine] allow, deny and source_table_size.
void read_engine_access(TableReader& reader, EngineConfig::Access& access);

// "10/s" -> 10 (a whole number of new connections per second, 1 or more); nullopt for
// anything else. The integer 0 in the file turns the limit off.
std::optional<unsigned> parse_connection_rate(std::string_view text);

} // namespace uringfwd::config
