// A member's life as a route's on_member_down and slow_start shape it, over real
// sockets: with "close", a member whose server dies has its open connections reset by
// us within a check interval, and so has one removed; with slow start, a member that
// comes back gets a small share first and its full share once the ramp is over.
#include "tests/support/eventually.hpp"
#include "tests/support/named_server.hpp"
#include "tests/support/pool_members.hpp"
#include "tests/support/proxy_under_test.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto kInterval = 100ms;
// Scheduling noise on a loaded 2-CPU machine: what a timer may run late by.
constexpr auto kSlack = 600ms;

RouteConfig web_route(std::vector<UpstreamMember> members) {
    RouteConfig r;
    r.name = "web";
    r.listen = {loopback_any_port()};
    r.pool.members = std::move(members);
    return r;
}

RouteConfig checked_route(std::vector<UpstreamMember> members, OnMemberDown on_down) {
    RouteConfig r = web_route(std::move(members));
    r.on_member_down = on_down;
    r.pool.health_check.enabled = true;
    r.pool.health_check.interval = kInterval;
    r.pool.health_check.timeout = 80ms;
    r.pool.health_check.fall = 1;
    r.pool.health_check.rise = 1;
    return r;
}

IoStatus read_status(int fd, std::chrono::milliseconds within = 5000ms) {
    std::byte one{};
    return recv_all(fd, std::span<std::byte>(&one, 1), Deadline{within}).status;
}

// A client and the upstream's end of its connection through the proxy to `upstream`,
// a byte through each way. The health checks' connects wait in the same backlog: they
// are the ones that send nothing and close.
struct Pair {
    UniqueFd client;
    UniqueFd server;
};
Pair connect_pair(const Endpoint& proxy, const Listener& upstream) {
    Pair p{connect_to(proxy), {}};
    if (send_text(p.client.get(), "u", Deadline{5s}).status != IoStatus::Ok)
        return {};
    for (int i = 0; i < 50 && !p.server; ++i) {
        UniqueFd accepted = accept_one(upstream.fd(), Deadline{5s});
        if (accepted && read_status(accepted.get()) == IoStatus::Ok)
            p.server = std::move(accepted);
    }
    if (!p.server || send_text(p.server.get(), "d", Deadline{5s}).status != IoStatus::Ok ||
        read_status(p.client.get()) != IoStatus::Ok)
        return {};
    return p;
}

// Route "web": primary a (a bare listener, so the test holds the upstream's end), backup
// b (every client goes to a while it is up), checked every kInterval with fall = 1; one
// connection through to a.
struct HeldThroughA {
    explicit HeldThroughA(OnMemberDown on_down)
        : proxy({checked_route({member_at(a->endpoint()), member_at(b.endpoint(), 1, true)},
                               on_down)}),
          pair(connect_pair(proxy.endpoint(), *a)) {}
    std::optional<Listener> a{listen_loopback(Family::Inet4)};
    NamedServer b{'b'};
    ProxyUnderTest proxy;
    Pair pair;
};

TEST(MemberLifecycle, CloseResetsTheConnectionsOfAMemberWhoseServerDies) {
    HeldThroughA t{OnMemberDown::Close};
    ASSERT_TRUE(t.pair.client) << "no connection through to a";

    // The server stops accepting (its held connection stays open on its side): its next
    // check is refused, fall = 1 marks it down, and we reset what it had.
    const auto died = Clock::now();
    t.a.reset();
    EXPECT_EQ(read_status(t.pair.client.get()), IoStatus::Reset);
    const auto elapsed = Clock::now() - died;
    EXPECT_LT(elapsed, kInterval + kSlack)
        << std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count() << " ms";
    EXPECT_EQ(read_status(t.pair.server.get()), IoStatus::Reset);
    EXPECT_TRUE(eventually([&] { return t.proxy.stats().closed(CloseReason::MemberDown) == 1; },
                           Deadline{5s}));
    EXPECT_EQ(name_through(t.proxy.endpoint(), Deadline{5s}), 'b'); // the backup serves
}

// Long connections outlive reloads: one opened before a reload is reset too when its
// member goes down after it.
TEST(MemberLifecycle, CloseResetsAConnectionOpenedBeforeAReload) {
    HeldThroughA t{OnMemberDown::Close};
    ASSERT_TRUE(t.pair.client);
    EngineConfig file = t.proxy.config();
    file.routes[0].listen = {t.proxy.endpoint()};
    ASSERT_TRUE(t.proxy.engine().reconfigure(file).applied);
    t.a.reset();
    EXPECT_EQ(read_status(t.pair.client.get()), IoStatus::Reset);
    EXPECT_EQ(read_status(t.pair.server.get()), IoStatus::Reset);
}

TEST(MemberLifecycle, KeepLetsTheConnectionsOfAMemberGoneDownGoOn) {
    HeldThroughA t{OnMemberDown::Keep};
    ASSERT_TRUE(t.pair.client);
    t.a.reset();
    ASSERT_TRUE(eventually(
        [&] { return t.proxy.engine().members("web").at(0).health == MemberHealthState::Down; },
        Deadline{5s}));
    std::this_thread::sleep_for(3 * kInterval);
    ASSERT_EQ(send_text(t.pair.client.get(), "x", Deadline{5s}).status, IoStatus::Ok);
    EXPECT_EQ(read_status(t.pair.server.get()), IoStatus::Ok);
    EXPECT_EQ(t.proxy.stats().closed(CloseReason::MemberDown), 0u);
}

TEST(MemberLifecycle, CloseResetsTheConnectionsOfARemovedMember) {
    NamedServer a{'a'};
    NamedServer b{'b'};
    RouteConfig route = web_route({member_at(a.endpoint()), member_at(b.endpoint(), 1, true)});
    route.on_member_down = OnMemberDown::Close;
    ProxyUnderTest proxy{{route}};
    UniqueFd held;
    ASSERT_EQ(name_through(proxy.endpoint(), Deadline{5s}, {}, &held), 'a');
    ASSERT_TRUE(proxy.engine().remove_member("web", a.endpoint().to_string()).ok);
    EXPECT_EQ(read_status(held.get()), IoStatus::Reset);
    EXPECT_TRUE(eventually([&] { return proxy.stats().closed(CloseReason::MemberDown) == 1; },
                           Deadline{5s}));
}

TEST(MemberLifecycle, SlowStartGivesAMemberBackItsShareStepByStep) {
    NamedServer a{'a'};
    NamedServer b{'b'};
    RouteConfig route = web_route({member_at(a.endpoint(), 10), member_at(b.endpoint(), 10)});
    constexpr auto kRamp = 2000ms;
    route.slow_start = kRamp;
    ProxyUnderTest proxy{{route}};
    const std::string key = a.endpoint().to_string();
    ASSERT_TRUE(proxy.engine().set_member_state("web", key, MemberState::Drain).ok);
    ASSERT_TRUE(proxy.engine().set_member_state("web", key, MemberState::Ready).ok);
    const auto ready = Clock::now();

    // The first half of the ramp: its weight climbs from 0 to 5 against b's 10, a share
    // of about a fifth on average (a half would be its full share).
    int to_a = 0;
    int total = 0;
    while (Clock::now() - ready < kRamp / 2 - 100ms && total < 3000) {
        const std::optional<char> name = name_through(proxy.endpoint(), Deadline{5s});
        ASSERT_TRUE(name);
        to_a += *name == 'a' ? 1 : 0;
        ++total;
    }
    ASSERT_GE(total, 40) << "too few connections to tell";
    EXPECT_LT(to_a, total * 35 / 100) << to_a << " of " << total;
    const unsigned ramping = proxy.engine().members("web").at(0).effective_weight;
    EXPECT_LT(ramping, 10u);

    // After it: the full share.
    std::this_thread::sleep_until(ready + kRamp + 100ms);
    EXPECT_EQ(proxy.engine().members("web").at(0).effective_weight, 10u);
    int after = 0;
    for (int i = 0; i < 200; ++i)
        after += name_through(proxy.endpoint(), Deadline{5s}) == 'a' ? 1 : 0;
    EXPECT_NEAR(after, 100, 20);
}

TEST(MemberLifecycle, AReloadLetsASlowStartUnderWayGoOn) {
    NamedServer a{'a'};
    NamedServer b{'b'};
    RouteConfig route = web_route({member_at(a.endpoint(), 10), member_at(b.endpoint(), 10)});
    route.slow_start = 2000ms;
    ProxyUnderTest proxy{{route}};
    const std::string key = a.endpoint().to_string();
    ASSERT_TRUE(proxy.engine().set_member_state("web", key, MemberState::Drain).ok);
    ASSERT_TRUE(proxy.engine().set_member_state("web", key, MemberState::Ready).ok);
    const auto ready = Clock::now();
    EngineConfig file = proxy.config();
    file.routes[0].listen = {proxy.endpoint()};
    ASSERT_TRUE(proxy.engine().reconfigure(file).applied);
    std::this_thread::sleep_until(ready + 500ms);
    // A quarter of the way (2.5 of 10), give or take a slow machine's delays.
    const unsigned ramping = proxy.engine().members("web").at(0).effective_weight;
    EXPECT_GE(ramping, 1u);
    EXPECT_LE(ramping, 7u);
}

TEST(MemberLifecycle, MaglevRefusesSlowStartWithAClearError) {
    NamedServer a{'a'};
    RouteConfig route = web_route({member_at(a.endpoint())});
    route.pool.balance = BalancePolicy::Maglev;
    route.slow_start = 1s;
    EngineConfig config;
    config.routes = {route};
    try {
        Engine::start(config);
        FAIL() << "started";
    } catch (const StartError& e) {
        EXPECT_NE(std::string(e.what()).find("slow_start cannot be used with balance = maglev"),
                  std::string::npos)
            << e.what();
    }
}

} // namespace
} // namespace uringfwd::test
