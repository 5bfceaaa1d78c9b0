// Values some flags share the parsing of: CPU lists and addresses. A bad one ends the
// program with fail(), naming the flag.
#pragma once

#include "uringfwd/endpoint.hpp"

#include <string>
#include <vector>

namespace uringfwd::cli {

std::vector<int> parse_cpus(const std::string& flag, const std::string& text);

// --numa-node: the CPUs of those nodes, further limited by --cpus when both are given.
std::vector<int> cpus_of_nodes(const std::string& nodes_text, const std::vector<int>& cpus);

Endpoint parse_endpoint(const std::string& flag, const std::string& text);

} // namespace uringfwd::cli
