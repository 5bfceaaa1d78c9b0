// Engine::reconfigure while traffic flows: streams keep their upstream and arrive
// intact, an address kept is never closed (no refused connect), addresses added and
// removed come and go, and a configuration that cannot be applied changes nothing.
#include "tests/support/echo_load.hpp"
#include "tests/support/echo_server.hpp"
#include "tests/support/named_server.hpp"
#include "tests/support/proc_stats.hpp"
#include "tests/support/proxy_under_test.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <span>
#include <thread>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

UpstreamMember member(const Endpoint& address, unsigned weight = 1) {
    UpstreamMember m;
    m.address = address;
    m.weight = weight;
    return m;
}

RouteConfig route(std::string name, Endpoint listen, std::vector<UpstreamMember> members) {
    RouteConfig r;
    r.name = std::move(name);
    r.listen = {std::move(listen)};
    r.pool.members = std::move(members);
    return r;
}

// The running engine's configuration with other routes.
EngineConfig with_routes(const ProxyUnderTest& proxy, std::vector<RouteConfig> routes) {
    EngineConfig config = proxy.config();
    config.routes = std::move(routes);
    return config;
}

TEST(Reconfigure, StreamsStayIntactAndKeptAddressesNeverRefuse) {
    EchoServer e1;
    EchoServer e2;
    EchoServer e3;
    NamedServer extra_member{'x'};
    ProxyUnderTest proxy{{route("main", loopback_any_port(), {member(e1.endpoint())})}};
    const Endpoint main_at = proxy.endpoint("main");

    // 64 streams of 1 MiB each way, sha256-checked, while the routes change under them.
    EchoLoadResult load;
    std::thread streams([&] { load = run_echo_load(main_at, 64, 1 << 20, 2, Deadline{120s}); });
    // A client connecting all along to the address every configuration keeps.
    std::atomic<bool> reloading{true};
    std::atomic<int> connects{0};
    std::atomic<int> refused{0};
    std::thread prober([&] {
        while (reloading.load() && connects.load() < 5000) {
            UniqueFd fd;
            int err = try_connect(main_at, 2000ms, fd);
            ++connects;
            if (err == ECONNREFUSED)
                ++refused;
        }
    });

    const std::vector<std::vector<UpstreamMember>> pools = {
        {member(e1.endpoint()), member(e2.endpoint())},
        {member(e2.endpoint(), 3), member(e3.endpoint(), 1)},
        {member(e3.endpoint())},
        {member(e1.endpoint(), 2), member(e2.endpoint()), member(e3.endpoint(), 5)},
    };
    for (int i = 0; i < 20; ++i) {
        std::vector<RouteConfig> routes = {route("main", main_at, pools[i % pools.size()])};
        if (i % 2 == 0) // a route that comes and goes
            routes.push_back(
                route("extra", loopback_any_port(), {member(extra_member.endpoint())}));
        const ReloadResult r = proxy.engine().reconfigure(with_routes(proxy, routes));
        ASSERT_TRUE(r.applied) << i << ": " << (r.errors.empty() ? "" : r.errors.front());
        EXPECT_TRUE(r.needs_restart.empty()) << r.needs_restart.front();
        if (i % 2 == 0) {
            EXPECT_EQ(name_through(proxy.endpoint("extra"), Deadline{5s}), 'x') << i;
        } else {
            EXPECT_TRUE(proxy.engine().listen_endpoints("extra").empty()) << i;
        }
        std::this_thread::sleep_for(20ms);
    }
    reloading = false;
    prober.join();
    streams.join();
    EXPECT_EQ(load.verified, 64u) << (load.failures.empty() ? "" : load.failures.front());
    EXPECT_EQ(refused.load(), 0) << "of " << connects.load() << " connects";
    EXPECT_GT(connects.load(), 20);
    // Every member got some of the connections made meanwhile.
    EXPECT_GT(e2.accepted() + e3.accepted(), 0u);
}

TEST(Reconfigure, WhatCannotBeAppliedChangesNothing) {
    NamedServer a{'a'};
    NamedServer b{'b'};
    ProxyUnderTest proxy{{route("main", loopback_any_port(), {member(a.endpoint())})}};
    const Endpoint main_at = proxy.endpoint("main");

    // An upstream name that does not resolve, a route named twice, an address in use.
    Endpoint nowhere = Endpoint::parse("no-such-host.invalid:80");
    Listener taken = listen_loopback(Family::Inet4);
    const std::vector<EngineConfig> bad = {
        with_routes(proxy, {route("main", main_at, {member(nowhere)})}),
        with_routes(proxy, {route("main", main_at, {member(b.endpoint())}),
                            route("main", loopback_any_port(), {member(b.endpoint())})}),
        with_routes(proxy, {route("main", main_at, {member(b.endpoint())}),
                            route("other", taken.endpoint(), {member(b.endpoint())})}),
    };
    for (const EngineConfig& config : bad) {
        const ReloadResult r = proxy.engine().reconfigure(config);
        EXPECT_FALSE(r.applied);
        ASSERT_FALSE(r.errors.empty());
        EXPECT_EQ(name_through(main_at, Deadline{5s}), 'a') << r.errors.front();
        EXPECT_TRUE(proxy.engine().listen_endpoints("other").empty());
    }
    // Engine-wide settings are reported, not changed; the routes still are.
    EngineConfig next = with_routes(proxy, {route("main", main_at, {member(b.endpoint())})});
    next.splice.max_pipes = 7;
    const ReloadResult r = proxy.engine().reconfigure(next);
    EXPECT_TRUE(r.applied);
    ASSERT_EQ(r.needs_restart.size(), 1u);
    EXPECT_EQ(r.needs_restart.front(), "pipes");
    EXPECT_EQ(name_through(main_at, Deadline{5s}), 'b');
}

TEST(Reconfigure, ARemovedAddressClosesButItsConnectionsGoOn) {
    NamedServer a{'a'};
    ProxyUnderTest proxy{{route("main", loopback_any_port(), {member(a.endpoint())}),
                          route("gone", loopback_any_port(), {member(a.endpoint())})}};
    const Endpoint gone_at = proxy.endpoint("gone");
    UniqueFd held;
    ASSERT_EQ(name_through(gone_at, Deadline{5s}, {}, &held), 'a');
    const ReloadResult r = proxy.engine().reconfigure(
        with_routes(proxy, {route("main", proxy.endpoint("main"), {member(a.endpoint())})}));
    ASSERT_TRUE(r.applied);
    UniqueFd fd;
    EXPECT_EQ(try_connect(gone_at, 1000ms, fd), ECONNREFUSED);
    // The connection made before still echoes.
    ASSERT_EQ(send_text(held.get(), "ping", Deadline{5s}).status, IoStatus::Ok);
    char echo[4] = {};
    std::span<std::byte> out{reinterpret_cast<std::byte*>(echo), 4};
    EXPECT_EQ(recv_all(held.get(), out, Deadline{5s}).status, IoStatus::Ok);
    EXPECT_EQ(std::string(echo, 4), "ping");
}

} // namespace
} // namespace uringfwd::test
