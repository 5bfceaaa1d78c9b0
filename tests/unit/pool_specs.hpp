// Pools for the unit tests of a shard's balancing (balancing_test.cpp,
// runtime_pool_test.cpp): members 10.0.0.1:80, 10.0.0.2:80, ... as specified.
#pragma once

#include "uringfwd/route.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace uringfwd::engine::test_pools {

struct MemberSpec {
    unsigned weight = 1;
    bool backup = false;
    std::size_t max_connections = 0;
};

inline UpstreamPool pool_of(BalancePolicy policy, const std::vector<MemberSpec>& specs) {
    UpstreamPool pool;
    pool.balance = policy;
    for (std::size_t i = 0; i < specs.size(); ++i) {
        UpstreamMember m;
        m.address = Endpoint::parse("10.0.0." + std::to_string(i + 1) + ":80");
        m.weight = specs[i].weight;
        m.backup = specs[i].backup;
        m.max_connections = specs[i].max_connections;
        pool.members.push_back(m);
    }
    return pool;
}

inline std::vector<std::string> keys_of(const UpstreamPool& pool) {
    std::vector<std::string> keys;
    for (const UpstreamMember& m : pool.members)
        keys.push_back(m.address.to_string());
    return keys;
}

} // namespace uringfwd::engine::test_pools
