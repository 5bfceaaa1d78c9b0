// Routes and pools over real sockets: several routes in one engine, each balancing
// over its members (round-robin by weight, least-active, Maglev), failing over to the
// next member when a connect fails, keeping backups for when no primary is left,
// holding clients at the route's connection limit and closing idle connections.
// Members are NamedServers, so each connection tells which member it reached.
#include "tests/support/blackhole.hpp"
#include "tests/support/eventually.hpp"
#include "tests/support/named_server.hpp"
#include "tests/support/pool_members.hpp"
#include "tests/support/proc_stats.hpp"
#include "tests/support/proxy_under_test.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

RouteConfig route(std::string name, std::vector<UpstreamMember> members,
                  BalancePolicy balance = BalancePolicy::RoundRobin) {
    RouteConfig r;
    r.name = std::move(name);
    r.listen = {loopback_any_port()};
    r.pool.members = std::move(members);
    r.pool.balance = balance;
    r.pool.connect_timeout = 1000ms;
    return r;
}

void one_shard(EngineConfig& c) {
    c.placement.shards = 1;
}

TEST(Routes, EachRouteForwardsToItsOwnPool) {
    NamedServer a{'a'};
    NamedServer b{'b'};
    ProxyUnderTest proxy{
        {route("first", {member_at(a.endpoint())}), route("second", {member_at(b.endpoint())})}};
    EXPECT_EQ(name_through(proxy.endpoint("first"), Deadline{5s}), 'a');
    EXPECT_EQ(name_through(proxy.endpoint("second"), Deadline{5s}), 'b');
    EXPECT_NE(proxy.endpoint("first").port, proxy.endpoint("second").port);
}

TEST(Routes, RoundRobinFollowsTheWeights) {
    NamedServer a{'a'};
    NamedServer b{'b'};
    NamedServer c{'c'};
    ProxyUnderTest proxy{{route("web", {member_at(a.endpoint(), 1), member_at(b.endpoint(), 2),
                                        member_at(c.endpoint(), 3)})},
                         one_shard};
    const std::map<char, int> seen = spread(proxy.endpoint(), 3000);
    EXPECT_EQ(seen.count('?'), 0u);
    EXPECT_NEAR(seen.at('a'), 500, 150); // ±5 % of 3000
    EXPECT_NEAR(seen.at('b'), 1000, 150);
    EXPECT_NEAR(seen.at('c'), 1500, 150);
}

TEST(Routes, LeastActiveSendsNewClientsToTheIdleMember) {
    NamedServer a{'a'};
    NamedServer b{'b'};
    ProxyUnderTest proxy{{route("web", {member_at(a.endpoint()), member_at(b.endpoint())},
                                BalancePolicy::LeastActive)},
                         one_shard};
    // Ten held connections spread five and five; then the five on `a` end.
    std::vector<UniqueFd> on_a;
    std::vector<UniqueFd> on_b;
    for (int i = 0; i < 10; ++i) {
        UniqueFd fd;
        auto name = name_through(proxy.endpoint(), Deadline{5s}, {}, &fd);
        ASSERT_TRUE(name.has_value());
        (*name == 'a' ? on_a : on_b).push_back(std::move(fd));
    }
    EXPECT_EQ(on_a.size(), 5u);
    on_a.clear();
    ASSERT_TRUE(eventually([&] { return proxy.stats().active == 5; }, Deadline{5s}));
    // `b` still holds five: least-active sends the next five to `a` (round-robin would
    // alternate).
    for (int i = 0; i < 5; ++i) {
        UniqueFd fd;
        EXPECT_EQ(name_through(proxy.endpoint(), Deadline{5s}, {}, &fd), 'a');
        on_a.push_back(std::move(fd));
    }
}

// Client n of a test comes from 127.x.y.z, a distinct source address.
std::string source_address(int n) {
    return fmt::format("127.{}.{}.{}", 1 + n / 62500, (n / 250) % 250 + 1, n % 250 + 1);
}

// The members are named: a member's name is its Maglev key (its address when it has
// none), and the table is a function of the keys. With the servers' random ports as keys
// the table differed from run to run, and in about 1 run in 200 to 600 two members' walks
// shared a cycle (equal skips, or skips adding up to M: a run of 3000 random port sets
// had 5 moving 443 to 1885 clients of the other members; the run of issue 21 that counted
// ~700 extra moved was one), so the bound below failed with nothing wrong in the engine.
// Named a to e the table is the same in every run: 41 clients of the others move.
TEST(Routes, MaglevSpreadsClientsEvenlyAndKeepsEachOnItsMember) {
    std::vector<std::unique_ptr<NamedServer>> servers;
    std::vector<UpstreamMember> members;
    for (char name : std::string("abcde")) {
        servers.push_back(std::make_unique<NamedServer>(name));
        members.push_back(member_at(servers.back()->endpoint()));
        members.back().name = std::string(1, name);
    }
    ProxyUnderTest proxy{{route("web", members, BalancePolicy::Maglev)}, one_shard};
    ProxyUnderTest twin{{route("web", {members.rbegin(), members.rend()}, BalancePolicy::Maglev)},
                        one_shard};
    members.pop_back();
    ProxyUnderTest fewer{{route("web", members, BalancePolicy::Maglev)}, one_shard};

    constexpr int kClients = 10000;
    std::map<char, int> seen;
    int moved = 0;
    // Clients of the members that stay which `fewer` sent elsewhere: when, and where.
    std::vector<std::string> others_moved;
    std::map<int, int> others_per_thousand;
    for (int n = 0; n < kClients; ++n) {
        const std::string source = source_address(n);
        auto name = name_through(proxy.endpoint(), Deadline{5s}, source);
        ASSERT_TRUE(name.has_value()) << source;
        ++seen[*name];
        if (n % 10 == 0) { // the same client again, and through an engine listing the
                           // members in another order: the same member
            EXPECT_EQ(name_through(proxy.endpoint(), Deadline{5s}, source), name) << source;
            EXPECT_EQ(name_through(twin.endpoint(), Deadline{5s}, source), name) << source;
        }
        const auto after_removal = name_through(fewer.endpoint(), Deadline{5s}, source);
        EXPECT_TRUE(after_removal.has_value()) << source << " was not served";
        if (after_removal != name) {
            ++moved;
            if (*name != 'e') {
                others_moved.push_back(
                    fmt::format("#{} {}->{}", n, *name, after_removal ? *after_removal : '-'));
                ++others_per_thousand[n / 1000];
            }
        }
    }
    for (char name : std::string("abcde"))
        EXPECT_NEAR(seen[name], kClients / 5, kClients / 20) << name; // ±5 % of even
    // Removing one of five members moves its clients (all of them: their member is gone),
    // and few others. Bound the others, not the total: e's own share varies by a few per
    // cent with the hash (2205 moved once with e at 2065, of whom 140 were others).
    EXPECT_GE(moved, seen['e']);
    EXPECT_LE(moved - seen['e'], kClients * 4 / 100)
        << "clients of the other members moved; first " << others_moved.front() << ", last "
        << others_moved.back()
        << "; per thousand clients: " << fmt::format("{}", fmt::join(others_per_thousand, " "))
        << "; the smaller engine: " << fewer.stats().to_line();
    std::printf("maglev: a=%d b=%d c=%d d=%d e=%d, moved %d of %d when e was removed\n", seen['a'],
                seen['b'], seen['c'], seen['d'], seen['e'], moved, kClients);
}

TEST(Routes, RefusedMemberIsSkippedWithinTheRetries) {
    const ReservedPort refusing = reserve_refusing_port();
    NamedServer live{'l'};
    RouteConfig r = route("web", {member_at(refusing.endpoint), member_at(live.endpoint())});
    r.pool.retries = 1;
    ProxyUnderTest proxy{{r}, one_shard};
    const std::map<char, int> seen = spread(proxy.endpoint(), 100);
    EXPECT_EQ(seen.at('l'), 100);
    EXPECT_EQ(proxy.stats().closed_refused, 0u) << proxy.stats().to_line();
    EXPECT_GE(proxy.stats().upstream_failures, 1u);
}

TEST(Routes, StatsPerRouteAndMember) {
    const ReservedPort refusing = reserve_refusing_port();
    NamedServer live{'l'};
    RouteConfig r = route("web", {member_at(live.endpoint()), member_at(refusing.endpoint)});
    r.pool.retries = 1;
    ProxyUnderTest proxy{{r, route("other", {member_at(live.endpoint())})}, one_shard};
    EXPECT_EQ(spread(proxy.endpoint("web"), 10).at('l'), 10);
    ASSERT_TRUE(eventually([&] { return proxy.stats().active == 0; }, Deadline{5s}));
    const std::vector<RouteStats> stats = proxy.engine().route_stats();
    ASSERT_EQ(stats.size(), 2u);
    const RouteStats& web = stats[0];
    EXPECT_EQ(web.name, "web");
    EXPECT_EQ(web.accepted, 10u);
    EXPECT_EQ(web.active, 0u);
    EXPECT_EQ(web.closed_for(CloseReason::Clean), 10u);
    ASSERT_EQ(web.members.size(), 2u);
    EXPECT_EQ(web.members[0].name, live.endpoint().to_string());
    EXPECT_EQ(web.members[0].connects, 10u);
    EXPECT_EQ(web.members[0].failures, 0u);
    EXPECT_TRUE(web.members[0].up);
    EXPECT_EQ(web.members[1].connects, 0u);
    EXPECT_GE(web.members[1].failures, 1u);
    EXPECT_EQ(stats[1].name, "other");
    EXPECT_EQ(stats[1].accepted, 0u);
}

TEST(Routes, BlackholedMemberIsSkippedWithinTheDeadline) {
    const Blackhole hole;
    NamedServer live{'l'};
    RouteConfig r = route("web", {member_at(hole.endpoint()), member_at(live.endpoint())});
    r.pool.connect_timeout = 200ms;
    r.pool.retries = 1;
    r.pool.passive.fall = 0; // keep trying the blackhole: every other client meets it
    ProxyUnderTest proxy{{r}, one_shard};
    for (int i = 0; i < 6; ++i) {
        const auto start = Clock::now();
        EXPECT_EQ(name_through(proxy.endpoint(), Deadline{5s}), 'l');
        EXPECT_LT(Clock::now() - start, 400ms + 200ms); // the deadline, with slack
    }
    EXPECT_GE(proxy.stats().upstream_failures, 2u);
}

TEST(Routes, AllMembersDownResetsTheClientPromptlyAndSaysWhich) {
    const ReservedPort one = reserve_refusing_port();
    const ReservedPort two = reserve_refusing_port();
    RouteConfig r = route("api", {member_at(one.endpoint), member_at(two.endpoint)});
    r.pool.retries = 3;
    ProxyUnderTest proxy{{r}, one_shard};
    UniqueFd client;
    if (try_connect(proxy.endpoint(), 2000ms, client) == 0) {
        const auto start = Clock::now();
        const IoResult got = recv_until_eof(client.get(), Deadline{5s});
        EXPECT_TRUE(got.ended_by_peer()) << to_string(got.status);
        EXPECT_LT(Clock::now() - start, 1s);
    }
    ASSERT_TRUE(eventually([&] { return proxy.stats().closed_refused == 1; }, Deadline{5s}))
        << proxy.stats().to_line();
    bool logged = false;
    for (const std::string& line : proxy.log_lines())
        logged |= line.find("route \"api\"") != std::string::npos &&
                  line.find(one.endpoint.to_string()) != std::string::npos &&
                  line.find(two.endpoint.to_string()) != std::string::npos;
    EXPECT_TRUE(logged) << "no log line names the route and both members";
}

TEST(Routes, BackupServesOnlyWhileNoPrimaryIsUp) {
    NamedServer backup{'b'};
    std::optional<NamedServer> primary{std::in_place, 'p'};
    const Endpoint primary_at = primary->endpoint();
    RouteConfig r = route("web", {member_at(primary_at), member_at(backup.endpoint(), 1, true)});
    r.pool.retries = 1;
    r.pool.passive.fall = 1;
    r.pool.passive.backoff = 60s;
    ProxyUnderTest proxy{{r}, one_shard};
    EXPECT_EQ(spread(proxy.endpoint(), 20).at('p'), 20);
    primary.reset(); // its port now refuses
    // The first client finds the primary refusing, which marks it down, and is served
    // by the backup on its retry; later ones go to the backup at once.
    EXPECT_EQ(spread(proxy.endpoint(), 20).at('b'), 20);
    EXPECT_EQ(proxy.stats().upstream_failures, 1u) << proxy.stats().to_line();
}

// Issue 20: one primary already down, the other crashes, a healthy backup. Each client
// that meets the crashed primary's refusal fails over to the backup within its retries,
// although that primary still counts as up (passive health marks it down only on its
// `fall`-th failure): a primary this client has tried does not hold the backups back.
TEST(Routes, ARefusedConnectFailsOverToTheBackupWhileTheOtherPrimaryIsDown) {
    const ReservedPort down = reserve_refusing_port();
    std::optional<NamedServer> crashing{std::in_place, 'p'};
    NamedServer backup{'b'};
    RouteConfig r = route("web", {member_at(down.endpoint), member_at(crashing->endpoint()),
                                  member_at(backup.endpoint(), 1, true)});
    r.pool.retries = 2;
    r.pool.passive.backoff = 60s; // fall = 3, the default: a member is down on its third
    ProxyUnderTest proxy{{r}, one_shard};
    // Until the first primary has failed three times, round-robin sends every other
    // client to it; each is served by the second primary on its retry.
    for (int i = 0; i < 20 && !proxy.logs("is down", Deadline{0ms}); ++i)
        EXPECT_EQ(name_through(proxy.endpoint(), Deadline{5s}), 'p');
    ASSERT_TRUE(proxy.logs(down.endpoint.to_string() + " is down", Deadline{1s}));
    crashing.reset(); // its port refuses from now on; nothing has marked it down
    const EngineStats before = proxy.stats();
    const std::map<char, int> seen = spread(proxy.endpoint(), 10);
    EXPECT_EQ(seen.count('b') ? seen.at('b') : 0, 10) << proxy.stats().to_line();
    const EngineStats after = proxy.stats();
    EXPECT_EQ(after.closed_refused - before.closed_refused, 0u) << after.to_line();
    EXPECT_EQ(after.closed_no_upstream - before.closed_no_upstream, 0u) << after.to_line();
    EXPECT_GE(after.upstream_failures - before.upstream_failures, 1u);
}

TEST(Routes, HealthCheckKeepsClientsAwayFromADownMember) {
    NamedServer live{'l'};
    const ReservedPort refusing = reserve_refusing_port();
    RouteConfig r = route("web", {member_at(live.endpoint()), member_at(refusing.endpoint)});
    r.pool.retries = 0;
    r.pool.passive.fall = 0; // only the active check may mark it down
    r.pool.health_check.enabled = true;
    r.pool.health_check.interval = 50ms;
    r.pool.health_check.timeout = 200ms;
    r.pool.health_check.fall = 1;
    ProxyUnderTest proxy{{r}, one_shard};
    // Once the check has run, round-robin has only the live member left: no client
    // meets the refusing one (with no retries, one that did would be reset).
    ASSERT_TRUE(proxy.logs("is down", Deadline{5s}));
    EXPECT_EQ(spread(proxy.endpoint(), 20).at('l'), 20);
    EXPECT_EQ(proxy.stats().upstream_failures, 0u) << proxy.stats().to_line();
    const std::vector<MemberHealth> health = proxy.engine().member_health();
    ASSERT_EQ(health.size(), 2u);
    EXPECT_EQ(health[0].route, "web");
    EXPECT_TRUE(health[0].up);
    EXPECT_EQ(health[0].failures, 0u);
    EXPECT_EQ(health[1].member, refusing.endpoint.to_string());
    EXPECT_FALSE(health[1].up);
    EXPECT_GE(health[1].failures, 1u);
    EXPECT_EQ(health[1].transitions, 1u);
}

TEST(Routes, ConnectionLimitHoldsTheNextClientUntilOneCloses) {
    NamedServer a{'a'};
    RouteConfig r = route("web", {member_at(a.endpoint())});
    r.max_connections = 2;
    ProxyUnderTest proxy{{r}, one_shard};
    UniqueFd first;
    UniqueFd second;
    ASSERT_EQ(name_through(proxy.endpoint(), Deadline{5s}, {}, &first), 'a');
    ASSERT_EQ(name_through(proxy.endpoint(), Deadline{5s}, {}, &second), 'a');
    // The third is accepted by the kernel (backlog) but not forwarded.
    UniqueFd third = connect_to(proxy.endpoint());
    char name = 0;
    std::span<std::byte> out{reinterpret_cast<std::byte*>(&name), 1};
    EXPECT_EQ(recv_all(third.get(), out, Deadline{300ms}).status, IoStatus::Timeout);
    EXPECT_EQ(a.accepted(), 2u);
    first.reset();
    EXPECT_EQ(recv_all(third.get(), out, Deadline{5s}).status, IoStatus::Ok);
    EXPECT_EQ(name, 'a');
    EXPECT_EQ(proxy.stats().active, 2u);
    EXPECT_EQ(proxy.stats().accept_backoffs, 0u);
}

TEST(Routes, IdleTimeoutClosesAnIdlePairWithFinButNotASlowOne) {
    NamedServer a{'a'};
    RouteConfig r = route("web", {member_at(a.endpoint())});
    r.idle_timeout = 300ms;
    ProxyUnderTest proxy{{r}, one_shard};
    UniqueFd idle;
    UniqueFd slow;
    ASSERT_EQ(name_through(proxy.endpoint(), Deadline{5s}, {}, &idle), 'a');
    ASSERT_EQ(name_through(proxy.endpoint(), Deadline{5s}, {}, &slow), 'a');
    // The slow one sends a byte every 100 ms for 1.2 s and gets each back.
    for (int i = 0; i < 12; ++i) {
        ASSERT_EQ(send_text(slow.get(), "x", Deadline{1s}).status, IoStatus::Ok) << i;
        char echo = 0;
        std::span<std::byte> out{reinterpret_cast<std::byte*>(&echo), 1};
        ASSERT_EQ(recv_all(slow.get(), out, Deadline{1s}).status, IoStatus::Ok) << i;
        std::this_thread::sleep_for(100ms);
    }
    const IoResult got = recv_until_eof(idle.get(), Deadline{2s});
    EXPECT_EQ(got.status, IoStatus::Eof) << to_string(got.status); // FIN, not RST
    EXPECT_TRUE(eventually([&] { return proxy.stats().closed_idle_timeout == 1u; }, Deadline{2s}))
        << proxy.stats().to_line();
    EXPECT_EQ(proxy.stats().active, 1u);
}

// An upstream that reads nothing stalls the pair with the client's bytes held in the
// proxy (a full pipe or copy buffers): when the idle time runs out, a FIN would let the
// upstream take what it got for all of it, so both sides are reset instead.
TEST(Routes, IdleTimeoutResetsBothSidesOfAStalledPairThatHoldsBytes) {
    Listener upstream = listen_loopback(Family::Inet4);
    RouteConfig r = route("web", {member_at(upstream.endpoint())});
    r.idle_timeout = 500ms;
    ProxyUnderTest proxy{{r}, one_shard};
    // Made before the connection opens: under TSan filling it took longer than the
    // idle timeout, which then (rightly) closed the pair with FIN before a byte moved.
    const std::vector<std::byte> bulk(64u << 20, std::byte{'x'}); // more than it all holds
    UniqueFd client = connect_to(proxy.endpoint());
    UniqueFd server = accept_one(upstream.fd(), Deadline{5s});
    const IoResult sent = send_all(client.get(), bulk, Deadline{5s});
    EXPECT_EQ(sent.status, IoStatus::Reset) << to_string(sent.status) << " after " << sent.bytes;
    const IoResult server_end = recv_until_eof(server.get(), Deadline{3s});
    EXPECT_EQ(server_end.status, IoStatus::Reset)
        << to_string(server_end.status) << " after " << server_end.bytes;
    EXPECT_LT(server_end.bytes, sent.bytes); // what the proxy held never came
    // Counted as the shard publishes its counters, after the batch that closed it.
    EXPECT_TRUE(eventually([&] { return proxy.stats().closed_idle_timeout == 1u; }, Deadline{2s}))
        << proxy.stats().to_line();
}

} // namespace
} // namespace uringfwd::test
