// validate(const EngineConfig&): what Engine::start() refuses before anything is bound,
// every problem at once.
#include "uringfwd/config.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace uringfwd {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

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
    config.copy_buffers = 100;
    config.copy_buffer_size = 0;
    config.bulk_buffers = 32;
    config.bulk_buffer_size = 1024;
    EXPECT_THAT(validate(config),
                ElementsAre("copy_buffers must be a power of two between 1 and 32768, not 100",
                            "copy_buffer_size must be between 1 byte and 1 GiB, not 0",
                            "bulk_buffers must be 0 or a power of two between 1 and 16, not 32",
                            "bulk_buffer_size must be between 4096 bytes and 16 MiB, not 1024"));
    config.bulk_buffers = 0; // none: their size is not used
    config.copy_buffers = 0;
    EXPECT_THAT(validate(config),
                ElementsAre("copy_buffers must be a power of two between 1 and 32768, not 0",
                            "copy_buffer_size must be between 1 byte and 1 GiB, not 0"));
}

TEST(Validate, ASplicingEngineHasNoCopyBuffersToCheck) {
    EngineConfig config;
    config.data_path = DataPath::Splice;
    config.copy_buffers = 3;
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

} // namespace
} // namespace uringfwd
