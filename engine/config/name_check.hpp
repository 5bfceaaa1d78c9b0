// What a configuration names outside itself, looked up as a start looks it up: host
// names of listen and upstream addresses (the very resolve() and resolve_upstream() a
// start calls) and the users and groups of Unix listeners. So --check says what the
// start would say, at the line of the name.
#pragma once

#include "config/error_list.hpp"
#include "config/route_section.hpp"

#include <vector>

namespace uringfwd::config {

// Records one error per name that does not resolve. Blocks on lookups (getaddrinfo,
// NSS): never call it from a shard.
void check_names(const std::vector<ParsedRoute>& routes, ErrorList& errors);

} // namespace uringfwd::config
