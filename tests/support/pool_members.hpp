// Building pools for tests, and seeing how a pool spreads connections: which member
// (a NamedServer) each of n new connections reaches.
#pragma once

#include "tests/support/named_server.hpp"
#include "uringfwd/route.hpp"

#include <map>
#include <string>

namespace uringfwd::test {

inline UpstreamMember member_at(const Endpoint& address, unsigned weight = 1, bool backup = false) {
    UpstreamMember m;
    m.address = address;
    m.weight = weight;
    m.backup = backup;
    return m;
}

// How many of `n` new connections to `proxy` (from `source`, an IPv4 loopback address,
// when given) reached each member, by name; '?' counts those that reached none.
std::map<char, int> spread(const Endpoint& proxy, int n, const std::string& source = {});

} // namespace uringfwd::test
