// EngineInfo as text: the start-up line the binary prints and scripts read, built from
// the structure (Engine::info()) rather than searched for in Engine::describe().
#include "uringfwd/engine.hpp"

#include <gtest/gtest.h>

namespace uringfwd {
namespace {

RouteInfo route(std::string name, std::string listen, std::vector<std::string> members) {
    RouteInfo r;
    r.name = std::move(name);
    r.listen.push_back(Endpoint::parse(listen));
    r.members = std::move(members);
    return r;
}

ShardInfo shard(int cpu, int node) {
    ShardInfo s;
    s.cpu = cpu;
    s.node = node;
    s.data_path = DataPath::Auto;
    s.inline_splice = true;
    s.pipe_size = 1048576;
    s.max_pipes = 128;
    s.copy_buffers = 128;
    s.copy_buffer_size = 32768;
    s.steering = "incoming cpu + bpf";
    s.ring_features = "single-issuer";
    return s;
}

TEST(EngineInfo, OneRouteWithOneMemberNamesNeitherRouteNorPolicy) {
    EngineInfo info;
    info.routes.push_back(route("default", "127.0.0.1:9000", {"127.0.0.1:8080"}));
    info.shards = {shard(0, 0), shard(1, 0)};
    EXPECT_EQ(describe_serving(info),
              "listening on 127.0.0.1:9000, forwarding to 127.0.0.1:8080; 2 shards (node 0: 2)");
}

TEST(EngineInfo, SeveralRoutesOrMembersNameTheRouteAndItsPolicy) {
    EngineInfo info;
    info.routes.push_back(route("web", "127.0.0.1:80", {"10.0.0.1:80", "10.0.0.2:80"}));
    info.routes.push_back(route("db", "[::1]:5432", {"unix:/run/pg.sock"}));
    info.routes[0].balance = BalancePolicy::Maglev;
    info.shards = {shard(0, 0), shard(8, 1), shard(9, -1)};
    EXPECT_EQ(describe_routes(info.routes),
              "listening on 127.0.0.1:80, forwarding to 10.0.0.1:80 10.0.0.2:80 (route web, "
              "maglev); listening on [::1]:5432, forwarding to unix:/run/pg.sock (route db, "
              "round-robin)");
    EXPECT_EQ(describe_serving(info),
              describe_routes(info.routes) + "; 3 shards (node ?: 1, node 0: 1, node 1: 1)");
}

TEST(EngineInfo, AShardSaysWhatItGot) {
    ShardInfo s = shard(3, 0);
    EXPECT_EQ(describe(s), "cpu 3, data path auto, splices inline, pipes 1048576 bytes (at most "
                           "128), 128 copy buffers of 32768 bytes, steering incoming cpu + bpf, "
                           "single-issuer");
    s.data_path = DataPath::Copy;
    s.inline_splice = false;
    s.bulk_buffers = 16;
    s.bulk_buffer_size = 262144;
    s.busy_poll = std::chrono::microseconds{50};
    s.direct_descriptors = true;
    s.direct_slots = 1024;
    EXPECT_EQ(describe(s), "cpu 3, data path copy, splices ring, pipes 1048576 bytes (at most "
                           "128), 128 copy buffers of 32768 bytes, 16 bulk buffers of 262144 "
                           "bytes, steering incoming cpu + bpf, busy-poll 50 us, single-issuer "
                           "direct-descriptors=1024");
}

} // namespace
} // namespace uringfwd
