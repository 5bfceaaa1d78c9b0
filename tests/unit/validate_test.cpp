// validate(const EngineConfig&): what Engine::start() refuses before anything is bound,
// every problem at once.
#include "uringfwd/config.hpp"
#include "uringfwd/route.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace uringfwd {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::StartsWith;

EngineConfig one_route() {
    EngineConfig config;
    RouteConfig route;
    route.name = "web";
    route.listen = {Endpoint::parse("127.0.0.1:0")};
    route.pool.members = {UpstreamMember{Endpoint::parse("127.0.0.1:8080")}};
    config.routes = {route};
    return config;
}

TEST(Validate, TheDefaultsAndTheShorthandPass) {
    EXPECT_THAT(validate(EngineConfig{}), IsEmpty());
    EngineConfig shorthand;
    shorthand.listen = Endpoint::parse("127.0.0.1:9000");
    shorthand.upstream = Endpoint::parse("127.0.0.1:8080");
    EXPECT_THAT(validate(shorthand), IsEmpty());
    EXPECT_THAT(validate(one_route()), IsEmpty());
}

TEST(Validate, TwoRoutesOfOneNameAreRefused) {
    // start() accepted them once (only reconfigure() refused them), and the second was
    // then unreachable by its name (update_pool(), metrics, the access log).
    EngineConfig config = one_route();
    config.routes.push_back(config.routes.front());
    EXPECT_THAT(validate(config), ElementsAre("route \"web\" is defined twice"));
}

TEST(Validate, RoutesRefuseListenAndUpstreamBesideThem) {
    EngineConfig config = one_route();
    config.listen = Endpoint::parse("127.0.0.1:9000");
    config.upstream = Endpoint::parse("unix:/run/app.sock");
    EXPECT_THAT(validate(config),
                ElementsAre("listen (127.0.0.1:9000) cannot be had with routes: give each route "
                            "its own listen addresses",
                            "upstream (unix:/run/app.sock) cannot be had with routes: give each "
                            "route's pool its members"));
}

TEST(Validate, CopyBuffersTheKernelCannotTakeAreAllNamed) {
    EngineConfig config;
    config.copy.copy_buffers = 100;
    config.copy.copy_buffer_size = 0;
    config.copy.bulk_buffers = 32;
    config.copy.bulk_buffer_size = 1024;
    EXPECT_THAT(validate(config),
                ElementsAre("copy_buffers must be a power of two between 1 and 32768, not 100",
                            "copy_buffer_size must be between 1 byte and 1 GiB, not 0",
                            "bulk_buffers must be 0 or a power of two between 1 and 16, not 32",
                            "bulk_buffer_size must be between 4096 bytes and 16 MiB, not 1024"));
    config.copy.bulk_buffers = 0; // none: their size is not used
    config.copy.copy_buffers = 0;
    EXPECT_THAT(validate(config),
                ElementsAre("copy_buffers must be a power of two between 1 and 32768, not 0",
                            "copy_buffer_size must be between 1 byte and 1 GiB, not 0"));
}

TEST(Validate, ASplicingEngineHasNoCopyBuffersToCheck) {
    EngineConfig config;
    config.data_path = DataPath::Splice;
    config.copy.copy_buffers = 3;
    EXPECT_THAT(validate(config), IsEmpty());
}

TEST(Validate, MaglevRefusesSlowStartOfTheRouteOrAMember) {
    EngineConfig config = one_route();
    config.routes[0].pool.balance = BalancePolicy::Maglev;
    EXPECT_THAT(validate(config), IsEmpty());
    config.routes[0].slow_start = std::chrono::seconds{30};
    const std::string refused =
        "route \"web\": slow_start cannot be used with balance = maglev: a Maglev lookup table "
        "has no weight to ramp up (a member that comes up takes its clients back at once)";
    EXPECT_THAT(validate(config), ElementsAre(refused));
    config.routes[0].slow_start = {};
    config.routes[0].pool.members[0].slow_start = std::chrono::seconds{5};
    EXPECT_THAT(validate(config), ElementsAre(refused));
    config.routes[0].pool.balance = BalancePolicy::RoundRobin; // fine there
    EXPECT_THAT(validate(config), IsEmpty());
}

TEST(Validate, ANegativeMaxDurationIsRefused) {
    EngineConfig config = one_route();
    config.routes[0].max_duration = std::chrono::milliseconds{-1};
    EXPECT_THAT(validate(config),
                ElementsAre("route \"web\": max_duration must not be negative (0: no limit)"));
    config.routes[0].max_duration = std::chrono::hours{1};
    EXPECT_THAT(validate(config), IsEmpty());
}

TEST(Validate, AccessListsMustBeCidrRangesInRoutesAndTheEngine) {
    EngineConfig config = one_route();
    config.routes[0].allow = {"127.0.0.0/8", "127.0.0.1/8"};
    config.routes[0].deny = {"example.com"};
    config.access.deny = {"::1/200"};
    EXPECT_THAT(validate(config),
                ElementsAre("route \"web\": allow: 127.0.0.1/8: bits are set past the prefix "
                            "length (did you mean the network address?)",
                            "route \"web\": deny: example.com: not an IPv4 or IPv6 address",
                            "[engine] deny: ::1/200: an IPv6 prefix has 0..128 bits"));
    config.routes[0].allow = {"127.0.0.0/8"};
    config.routes[0].deny = {"127.0.0.2", "::/0"};
    config.access.deny = {"::1/128"};
    EXPECT_THAT(validate(config), IsEmpty());
}

TEST(Validate, PerSourceLimitsAreRefusedOutOfRange) {
    EngineConfig config = one_route();
    RouteConfig& route = config.routes[0];
    route.connection_burst_per_source = 5;
    route.source_prefix_v4 = 0;
    route.source_prefix_v6 = 129;
    route.max_connections_per_source = std::size_t{1} << 32;
    config.access.source_table_size = 7;
    EXPECT_THAT(validate(config),
                ElementsAre("route \"web\": max_connections_per_source must be at most "
                            "4294967295, not 4294967296",
                            "route \"web\": connection_burst_per_source needs "
                            "connection_rate_per_source (a burst of a rate that is not limited)",
                            "route \"web\": source_prefix_v4 must be 1..32, not 0",
                            "route \"web\": source_prefix_v6 must be 1..128, not 129",
                            "source_table_size must be 8..16777216, not 7"));
    route.max_connections_per_source = 5;
    route.connection_rate_per_source = 10;
    route.source_prefix_v4 = 24;
    route.source_prefix_v6 = 48;
    config.access.source_table_size = 8;
    EXPECT_THAT(validate(config), IsEmpty());
}

TEST(Validate, InlineSplicesAndDirectDescriptorsOnCannotBeHadWithBulkPark) {
    EngineConfig config;
    config.experimental.bulk_park = std::chrono::milliseconds{20};
    EXPECT_THAT(validate(config), IsEmpty()); // auto: the ring's splices, plain fds
    config.splice.splice_mechanism = SpliceMechanism::Inline;
    config.ring.direct_descriptors = DirectDescriptors::On;
    EXPECT_THAT(validate(config),
                ElementsAre("splice_mechanism = \"inline\" cannot be had with bulk_park: a "
                            "parked socket is blocking, and an inline splice must never wait; "
                            "use \"ring\" or \"auto\"",
                            "direct_descriptors = \"on\" cannot be had with bulk_park: bulk_park "
                            "needs plain fds (it toggles O_NONBLOCK with fcntl)"));
    config.experimental.bulk_park = std::chrono::milliseconds{0};
    EXPECT_THAT(validate(config), IsEmpty());
}

TEST(Validate, ARouteWithoutListenAddressOrUpstreamIsNamed) {
    EngineConfig config = one_route();
    config.routes[0].listen.clear();
    config.routes[0].pool.members.clear();
    EXPECT_THAT(validate(config),
                ElementsAre("route \"web\": no listen address", "route \"web\": no upstream"));
}

TEST(Validate, TrustedSourcesThatAreNoCidrRangeAreNamed) {
    EngineConfig config = one_route();
    config.routes[0].trusted_sources = {"10.0.0.0/8", "10.0.0.1/8", "::1/129"};
    const std::vector<std::string> problems = validate(config);
    ASSERT_EQ(problems.size(), 2u) << ::testing::PrintToString(problems);
    EXPECT_THAT(problems[0], StartsWith("route \"web\": trusted_sources: 10.0.0.1/8: "));
    EXPECT_THAT(problems[1], StartsWith("route \"web\": trusted_sources: ::1/129: "));
    EXPECT_EQ(problems[0],
              "route \"web\": trusted_sources: 10.0.0.1/8: " + cidr_problem("10.0.0.1/8"));
}

TEST(Validate, SocketAccessIsForSocketFilesAndPermissionBitsOnly) {
    EngineConfig config = one_route();
    RouteConfig& route = config.routes[0];
    route.listen = {Endpoint::parse("127.0.0.1:0"), Endpoint::parse("unix:@abstract"),
                    Endpoint::parse("unix:/run/web.sock"), Endpoint::parse("unix:/run/ok.sock")};
    UnixSocketAccess group_only;
    group_only.group = "www-data";
    UnixSocketAccess too_wide;
    too_wide.mode = 01777;
    UnixSocketAccess fine;
    fine.mode = 0660;
    route.listen_access = {group_only, group_only, too_wide, fine};
    EXPECT_THAT(validate(config),
                ElementsAre("route \"web\": listen 127.0.0.1:0: mode, user and group are for "
                            "unix: paths only",
                            "route \"web\": listen unix:@abstract: mode, user and group are for "
                            "unix: paths only",
                            "route \"web\": listen unix:/run/web.sock: mode 1777 is more than "
                            "permission bits (at most 0777)"));
}

TEST(Validate, AMemberListedTwiceIsNamed) {
    EngineConfig config = one_route();
    std::vector<UpstreamMember>& members = config.routes[0].pool.members;
    members.push_back(members[0]);
    EXPECT_THAT(validate(config),
                ElementsAre("route \"web\": upstream 127.0.0.1:8080 is listed twice; give each a "
                            "name to connect to one address twice"));
    members[0].name = "a";
    members[1].name = "b";
    EXPECT_THAT(validate(config), IsEmpty()); // one address under two names
    members[1].name = "a";
    EXPECT_THAT(validate(config), ElementsAre("route \"web\": upstream a is listed twice"));
}

} // namespace
} // namespace uringfwd
