// Runtime control of pool members over real sockets (Engine::set_member_state(),
// set_member_weight(), add_member(), remove_member(), members()): a drained member
// takes no new connection from the moment the call returns while its open ones go on,
// under every policy; maintenance stops its health checks; weights and members change
// the spread; a reload keeps what was set at runtime.
#include "tests/support/named_server.hpp"
#include "tests/support/pool_members.hpp"
#include "tests/support/proxy_under_test.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

RouteConfig web_route(std::vector<UpstreamMember> members,
                      BalancePolicy balance = BalancePolicy::RoundRobin) {
    RouteConfig r;
    r.name = "web";
    r.listen = {loopback_any_port()};
    r.pool.members = std::move(members);
    r.pool.balance = balance;
    return r;
}

std::string key(const NamedServer& server) {
    return server.endpoint().to_string();
}

// A connection through the proxy that reached member `name`, held open (a few tries:
// the policy spreads them).
UniqueFd hold_connection_to(const Endpoint& proxy, char name) {
    for (int i = 0; i < 20; ++i) {
        UniqueFd fd;
        if (name_through(proxy, Deadline{5s}, {}, &fd) == name)
            return fd;
    }
    return {};
}

// The held connection still forwards both ways: bytes sent come back (the named
// servers echo).
bool echoes(int fd) {
    const std::string ping = "still here";
    if (send_text(fd, ping, Deadline{5s}).status != IoStatus::Ok)
        return false;
    std::string back(ping.size(), '\0');
    std::span<std::byte> out{reinterpret_cast<std::byte*>(back.data()), back.size()};
    return recv_all(fd, out, Deadline{5s}).status == IoStatus::Ok && back == ping;
}

const MemberInfo* find(const std::vector<MemberInfo>& members, const std::string& member) {
    for (const MemberInfo& m : members)
        if (m.member == member)
            return &m;
    return nullptr;
}

TEST(MemberState, DrainedMemberGetsNoNewConnectionUnderAConnectLoopAndReadyBringsItBack) {
    NamedServer a{'a'};
    NamedServer b{'b'};
    ProxyUnderTest proxy{{web_route({member_at(a.endpoint()), member_at(b.endpoint())})}};
    const Endpoint at = proxy.endpoint();
    UniqueFd held = hold_connection_to(at, 'a');
    ASSERT_TRUE(held) << "no connection reached a";

    // A client connecting all along (bounded in count and time); each connection is
    // stamped with whether it began after set_member_state() returned.
    std::atomic<bool> drained{false};
    std::atomic<bool> stop{false};
    std::atomic<int> after_drain_to_a{0};
    std::atomic<int> after_drain{0};
    std::atomic<int> before{0};
    std::thread loop([&] {
        const auto give_up = std::chrono::steady_clock::now() + 20s;
        for (int i = 0; i < 3000 && !stop.load() && std::chrono::steady_clock::now() < give_up;
             ++i) {
            const bool after = drained.load();
            const std::optional<char> name = name_through(at, Deadline{5s});
            if (!after) {
                ++before;
                continue;
            }
            ++after_drain;
            if (name == 'a')
                ++after_drain_to_a;
        }
    });
    while (before.load() < 50)
        std::this_thread::sleep_for(1ms);
    const ChangeResult r = proxy.engine().set_member_state("web", key(a), MemberState::Drain);
    ASSERT_TRUE(r.ok) << r.error;
    drained = true;
    while (after_drain.load() < 200)
        std::this_thread::sleep_for(1ms);
    stop = true;
    loop.join();
    EXPECT_EQ(after_drain_to_a.load(), 0) << "of " << after_drain.load();
    EXPECT_TRUE(echoes(held.get())) << "the drained member's open connection was cut";

    const std::vector<MemberInfo> members = proxy.engine().members("web");
    ASSERT_EQ(members.size(), 2u);
    const MemberInfo* info = find(members, key(a));
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(info->state, MemberState::Drain);
    EXPECT_EQ(info->state_source, "runtime");
    EXPECT_EQ(info->effective_weight, 0u);
    EXPECT_EQ(info->open, 1u); // the held one
    EXPECT_EQ(info->health, MemberHealthState::Unchecked);
    EXPECT_EQ(find(members, key(b))->state_source, "config");
    EXPECT_EQ(find(members, key(b))->effective_weight, 1u);

    ASSERT_TRUE(proxy.engine().set_member_state("web", key(a), MemberState::Ready).ok);
    const std::map<char, int> back = spread(at, 40);
    EXPECT_GE(back.count('a') ? back.at('a') : 0, 10) << "ready did not bring it back";
    EXPECT_EQ(find(proxy.engine().members("web"), key(a))->state_source, "config");
}

// Least-active and Maglev pass a drained member over too; Maglev's clients of it go to
// their next choice and come back with Ready.
TEST(MemberState, DrainHoldsForLeastActiveAndMaglev) {
    NamedServer a{'a'};
    NamedServer b{'b'};
    for (BalancePolicy policy : {BalancePolicy::LeastActive, BalancePolicy::Maglev}) {
        SCOPED_TRACE(std::string(to_string(policy)));
        ProxyUnderTest proxy{
            {web_route({member_at(a.endpoint()), member_at(b.endpoint())}, policy)}};
        const Endpoint at = proxy.endpoint();
        // A client address that the policy sends to a.
        std::string source;
        for (int i = 1; i < 60 && source.empty(); ++i) {
            const std::string candidate = "127.0.5." + std::to_string(i);
            if (name_through(at, Deadline{5s}, candidate) == 'a')
                source = candidate;
        }
        ASSERT_FALSE(source.empty());
        ASSERT_TRUE(proxy.engine().set_member_state("web", key(a), MemberState::Drain).ok);
        EXPECT_EQ(spread(at, 30, source).count('a'), 0u);
        ASSERT_TRUE(proxy.engine().set_member_state("web", key(a), MemberState::Ready).ok);
        const std::map<char, int> back = spread(at, 30, source);
        if (policy == BalancePolicy::Maglev)
            EXPECT_EQ(back.count('a') ? back.at('a') : 0, 30); // its own member again
        else
            EXPECT_GE(back.count('a') ? back.at('a') : 0, 5);
    }
}

// A selector's choice of a drained member is passed over too: the pool chooses.
TEST(MemberState, ASelectorsDrainedMemberIsPassedOver) {
    NamedServer a{'a'};
    NamedServer b{'b'};
    RouteConfig route = web_route({member_at(a.endpoint()), member_at(b.endpoint())});
    route.selector = [](const ConnectionInfo&) { return Selection::of_member(0); };
    ProxyUnderTest proxy{{route}};
    EXPECT_EQ(spread(proxy.endpoint(), 10).count('b'), 0u);
    ASSERT_TRUE(proxy.engine().set_member_state("web", key(a), MemberState::Drain).ok);
    const std::map<char, int> got = spread(proxy.endpoint(), 10);
    EXPECT_EQ(got.count('a'), 0u);
    EXPECT_EQ(got.count('b') ? got.at('b') : 0, 10);
}

TEST(MemberState, MaintStopsTheMembersHealthChecks) {
    NamedServer a{'a'};
    NamedServer b{'b'};
    RouteConfig route = web_route({member_at(a.endpoint()), member_at(b.endpoint())});
    route.pool.health_check.enabled = true;
    route.pool.health_check.interval = 100ms;
    route.pool.health_check.timeout = 80ms;
    ProxyUnderTest proxy{{route}};
    // Checks reach it before.
    const auto until = std::chrono::steady_clock::now() + 5s;
    while (a.accepted() < 2 && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(5ms);
    ASSERT_GE(a.accepted(), 2u);

    ASSERT_TRUE(proxy.engine().set_member_state("web", key(a), MemberState::Maint).ok);
    // A check already under way when it returned ends as it would: let it.
    std::this_thread::sleep_for(100ms);
    const uint64_t probes = a.accepted();
    std::this_thread::sleep_for(350ms); // three intervals and a half
    EXPECT_EQ(a.accepted(), probes) << "a member in maintenance was probed";
    EXPECT_EQ(spread(proxy.endpoint(), 10).count('a'), 0u);
    EXPECT_EQ(a.accepted(), probes);
    EXPECT_EQ(find(proxy.engine().members("web"), key(a))->state, MemberState::Maint);

    // Ready: its checks resume.
    ASSERT_TRUE(proxy.engine().set_member_state("web", key(a), MemberState::Ready).ok);
    const auto resumed = std::chrono::steady_clock::now() + 2s;
    while (a.accepted() == probes && std::chrono::steady_clock::now() < resumed)
        std::this_thread::sleep_for(5ms);
    EXPECT_GT(a.accepted(), probes);
}

TEST(MemberState, WeightsSetAtRuntimeChangeTheSpread) {
    NamedServer a{'a'};
    NamedServer b{'b'};
    ProxyUnderTest proxy{{web_route({member_at(a.endpoint()), member_at(b.endpoint())})}};
    ASSERT_TRUE(proxy.engine().set_member_weight("web", key(b), 3).ok);
    const std::map<char, int> got = spread(proxy.endpoint(), 600);
    // 1:3 over 600: 150 and 450, within 10 %.
    EXPECT_NEAR(got.count('a') ? got.at('a') : 0, 150, 15);
    EXPECT_NEAR(got.count('b') ? got.at('b') : 0, 450, 45);
    const std::vector<MemberInfo> members = proxy.engine().members("web");
    const MemberInfo* info = find(members, key(b));
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(info->weight, 3u);
    EXPECT_EQ(info->effective_weight, 3u);
    EXPECT_EQ(info->state_source, "runtime");
    EXPECT_GE(info->connects, 400u);

    const ChangeResult bad = proxy.engine().set_member_weight("web", key(b), 0);
    EXPECT_FALSE(bad.ok);
    EXPECT_NE(bad.error.find("1..1000"), std::string::npos) << bad.error;
}

TEST(MemberState, UnknownRoutesAndMembersAreNamedWithWhatThereIs) {
    NamedServer a{'a'};
    ProxyUnderTest proxy{{web_route({member_at(a.endpoint())})}};
    const ChangeResult no_route =
        proxy.engine().set_member_state("nope", key(a), MemberState::Drain);
    EXPECT_FALSE(no_route.ok);
    EXPECT_EQ(no_route.error, "no route nope; routes: web");
    const ChangeResult no_member =
        proxy.engine().set_member_state("web", "10.0.0.9:80", MemberState::Drain);
    EXPECT_FALSE(no_member.ok);
    EXPECT_EQ(no_member.error, "no member 10.0.0.9:80 in route web; its members: " + key(a));
    EXPECT_TRUE(proxy.engine().members("nope").empty());
    EXPECT_FALSE(proxy.engine().remove_member("web", key(a)).ok); // the last one
}

TEST(MemberState, AddedMemberTakesConnectionsAndARemovedOneKeepsItsOpenOnes) {
    NamedServer a{'a'};
    NamedServer b{'b'};
    ProxyUnderTest proxy{{web_route({member_at(a.endpoint())})}};
    const Endpoint at = proxy.endpoint();
    UniqueFd held = hold_connection_to(at, 'a');
    ASSERT_TRUE(held);

    ASSERT_TRUE(proxy.engine().add_member("web", member_at(b.endpoint())).ok);
    EXPECT_FALSE(proxy.engine().add_member("web", member_at(b.endpoint())).ok); // twice
    std::map<char, int> got = spread(at, 20);
    EXPECT_GE(got.count('b') ? got.at('b') : 0, 5);
    ASSERT_EQ(proxy.engine().members("web").size(), 2u);

    const ChangeResult removed = proxy.engine().remove_member("web", key(a));
    ASSERT_TRUE(removed.ok) << removed.error;
    got = spread(at, 20);
    EXPECT_EQ(got.count('a'), 0u);
    EXPECT_TRUE(echoes(held.get())) << "a removed member's open connection was cut";
    const std::vector<MemberInfo> members = proxy.engine().members("web");
    ASSERT_EQ(members.size(), 1u);
    EXPECT_EQ(members[0].member, key(b));
}

TEST(MemberState, AReloadKeepsRuntimeStateAndWeightOfMembersStillThere) {
    NamedServer a{'a'};
    NamedServer b{'b'};
    NamedServer c{'c'};
    ProxyUnderTest proxy{
        {web_route({member_at(a.endpoint()), member_at(b.endpoint()), member_at(c.endpoint())})}};
    ASSERT_TRUE(proxy.engine().set_member_state("web", key(a), MemberState::Drain).ok);
    ASSERT_TRUE(proxy.engine().set_member_weight("web", key(b), 3).ok);

    // The same file read again (SIGHUP): both kept. (Its listen address as bound: port
    // 0 would be a new port.)
    EngineConfig file = proxy.config();
    file.routes[0].listen = {proxy.endpoint()};
    const ReloadResult same = proxy.engine().reconfigure(file);
    ASSERT_TRUE(same.applied);
    std::vector<MemberInfo> members = proxy.engine().members("web");
    EXPECT_EQ(find(members, key(a))->state, MemberState::Drain);
    EXPECT_EQ(find(members, key(a))->state_source, "runtime");
    EXPECT_EQ(find(members, key(b))->weight, 3u);
    EXPECT_EQ(find(members, key(c))->state_source, "config");
    const std::map<char, int> got = spread(proxy.endpoint(), 80);
    EXPECT_EQ(got.count('a'), 0u);
    EXPECT_NEAR(got.count('b') ? got.at('b') : 0, 60, 6);

    // A file that changes b's weight itself: the file's wins; a's state stays.
    EngineConfig changed = file;
    changed.routes[0].pool.members[1].weight = 2;
    ASSERT_TRUE(proxy.engine().reconfigure(changed).applied);
    members = proxy.engine().members("web");
    EXPECT_EQ(find(members, key(b))->weight, 2u);
    EXPECT_EQ(find(members, key(b))->state_source, "config");
    EXPECT_EQ(find(members, key(a))->state, MemberState::Drain);

    // A file without a: its runtime state goes with it, and does not come back.
    EngineConfig without_a = file;
    without_a.routes[0].pool.members.erase(without_a.routes[0].pool.members.begin());
    ASSERT_TRUE(proxy.engine().reconfigure(without_a).applied);
    ASSERT_TRUE(proxy.engine().reconfigure(file).applied);
    EXPECT_EQ(find(proxy.engine().members("web"), key(a))->state, MemberState::Ready);
}

} // namespace
} // namespace uringfwd::test
