// Limits for the whole engine (issue 20): a route's and a member's max_connections
// hold on all shards together, whichever shard the kernel steers each client to; the
// clients beyond them wait (none is reset) and are let in as connections close, on
// whichever shard; RouteStats::waiting counts them. Two shards on CPUs 0 and 1.
#include "tests/support/named_server.hpp"
#include "tests/support/proc_stats.hpp"
#include "tests/support/proxy_under_test.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"

#include <gtest/gtest.h>

#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

bool cpus_0_and_1_available() {
    cpu_set_t set;
    CPU_ZERO(&set);
    return ::sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_ISSET(0, &set) &&
           CPU_ISSET(1, &set);
}

// How the clients reach the shards: all from CPU 0 (CPU steering puts them all on
// shard 0), alternately from CPUs 0 and 1 (half on each), or unpinned without CPU
// steering (the kernel's reuseport hash).
enum class Steering { OneCpu, BothCpus, KernelHash };

std::string name_of(Steering s) {
    switch (s) {
    case Steering::OneCpu:
        return "AllOnOneShard";
    case Steering::BothCpus:
        return "AlternatingShards";
    case Steering::KernelHash:
        return "KernelHash";
    }
    return "?";
}

// A connection made from a thread pinned to `cpu` (-1: not pinned): loopback handles
// the SYN on the connecting CPU, which CPU steering follows.
UniqueFd connect_from(int cpu, const Endpoint& to) {
    std::promise<UniqueFd> made;
    std::future<UniqueFd> fd = made.get_future();
    std::thread client([&] {
        if (cpu >= 0) {
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET(cpu, &set);
            ::pthread_setaffinity_np(::pthread_self(), sizeof(set), &set);
        }
        made.set_value(connect_to(to));
    });
    client.join();
    return fd.get();
}

int cpu_for(Steering s, int client) {
    switch (s) {
    case Steering::OneCpu:
        return 0;
    case Steering::BothCpus:
        return client % 2;
    case Steering::KernelHash:
        return -1;
    }
    return -1;
}

ConfigEdit two_shards(Steering s) {
    return [s](EngineConfig& c) {
        c.placement.shards = 2;
        c.placement.cpus = {0, 1};
        c.placement.steer_by_cpu = s != Steering::KernelHash;
    };
}

UpstreamMember member(const Endpoint& address, std::size_t max_connections = 0) {
    UpstreamMember m;
    m.address = address;
    m.max_connections = max_connections;
    return m;
}

RouteConfig route(std::vector<UpstreamMember> members, std::size_t max_connections = 0) {
    RouteConfig r;
    r.name = "web";
    r.listen = {loopback_any_port()};
    r.pool.members = std::move(members);
    r.pool.connect_timeout = 2000ms;
    r.max_connections = max_connections;
    return r;
}

// Clients that read the upstream's one-byte name as soon as they are forwarded; those
// still waiting have read nothing.
class Clients {
public:
    Clients(Steering steering, const Endpoint& to, int n) {
        for (int i = 0; i < n; ++i)
            fds_.push_back(connect_from(cpu_for(steering, i), to));
        served_.assign(fds_.size(), false);
    }
    // Reads whatever names have come, without waiting.
    std::size_t served() {
        std::size_t count = 0;
        for (std::size_t i = 0; i < fds_.size(); ++i) {
            if (!served_[i] && fds_[i]) {
                char name = 0;
                served_[i] = ::recv(fds_[i].get(), &name, 1, MSG_DONTWAIT) == 1;
            }
            count += served_[i] ? 1 : 0;
        }
        return count;
    }
    // served() once it has reached `n` (within 5 s), and still after `settle` more.
    std::size_t served_settled(std::size_t n, std::chrono::milliseconds settle = 300ms) {
        eventually([&] { return served() >= n; }, Deadline{5s});
        std::this_thread::sleep_for(settle);
        return served();
    }
    // Closes one client that was served; false if none is open.
    bool close_one_served() {
        for (std::size_t i = 0; i < fds_.size(); ++i) {
            if (served_[i] && fds_[i]) {
                fds_[i].reset();
                return true;
            }
        }
        return false;
    }
    // Clients whose connection ended (reset or closed) without a name.
    std::size_t ended_unserved() {
        std::size_t count = 0;
        for (std::size_t i = 0; i < fds_.size(); ++i) {
            if (served_[i] || !fds_[i])
                continue;
            char byte = 0;
            ssize_t n = ::recv(fds_[i].get(), &byte, 1, MSG_DONTWAIT | MSG_PEEK);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
                ++count;
        }
        return count;
    }

private:
    std::vector<UniqueFd> fds_;
    std::vector<bool> served_;
};

class EngineWideLimit : public ::testing::TestWithParam<Steering> {
protected:
    void SetUp() override {
        if (!cpus_0_and_1_available())
            GTEST_SKIP() << "needs CPUs 0 and 1";
    }
};

// max_connections 3 on 2 shards: exactly 3 open at once, whatever the steering; the
// others wait and go in one by one as connections close. Before issue 20 each shard
// let in ceil(3 / 2) = 2: 2 with all clients on one shard, 4 with both.
TEST_P(EngineWideLimit, RouteLimitHoldsExactlyThatManyOpenAtOnce) {
    NamedServer a{'a'};
    ProxyUnderTest proxy{{route({member(a.endpoint())}, 3)}, two_shards(GetParam())};
    constexpr int kClients = 8;
    Clients clients{GetParam(), proxy.endpoint(), kClients};
    EXPECT_EQ(clients.served_settled(3), 3u) << proxy.stats().to_line();
    EXPECT_EQ(a.open_connections(), 3u);
    EXPECT_EQ(proxy.stats().active, 3u);
    ASSERT_TRUE(eventually(
        [&] {
            auto stats = proxy.engine().route_stats();
            return !stats.empty() && stats[0].waiting == kClients - 3;
        },
        Deadline{2s}))
        << "waiting: " << proxy.engine().route_stats().at(0).waiting;
    // Each close lets exactly one more in, from whichever shard.
    for (std::size_t served = 4; served <= kClients; ++served) {
        ASSERT_TRUE(clients.close_one_served());
        EXPECT_EQ(clients.served_settled(served, 100ms), served);
        EXPECT_LE(a.open_connections(), 3u);
    }
    EXPECT_EQ(clients.ended_unserved(), 0u);
    EXPECT_EQ(proxy.stats().closed_no_upstream, 0u) << proxy.stats().to_line();
    EXPECT_EQ(proxy.stats().closed_local_error, 0u) << proxy.stats().to_line();
}

// A member's max_connections is the engine's too, and the clients beyond it wait for
// the member (as HAProxy queues for a full server) rather than being reset.
TEST_P(EngineWideLimit, MemberLimitHoldsExactlyThatManyAndTheRestWait) {
    NamedServer a{'a'};
    ProxyUnderTest proxy{{route({member(a.endpoint(), 2)})}, two_shards(GetParam())};
    constexpr int kClients = 6;
    Clients clients{GetParam(), proxy.endpoint(), kClients};
    EXPECT_EQ(clients.served_settled(2), 2u) << proxy.stats().to_line();
    EXPECT_EQ(a.open_connections(), 2u);
    EXPECT_EQ(clients.ended_unserved(), 0u) << proxy.stats().to_line();
    ASSERT_TRUE(eventually(
        [&] {
            auto stats = proxy.engine().route_stats();
            return !stats.empty() && stats[0].waiting == kClients - 2;
        },
        Deadline{2s}))
        << "waiting: " << proxy.engine().route_stats().at(0).waiting;
    for (std::size_t served = 3; served <= kClients; ++served) {
        ASSERT_TRUE(clients.close_one_served());
        EXPECT_EQ(clients.served_settled(served, 100ms), served);
        EXPECT_LE(a.open_connections(), 2u);
    }
    EXPECT_EQ(clients.ended_unserved(), 0u);
    EXPECT_EQ(proxy.stats().closed_no_upstream, 0u) << proxy.stats().to_line();
}

// A reload keeps the count of a route of the same name: the connections opened before
// it still count against the new value (a fresh count would let max_connections more in
// at every SIGHUP or DNS refresh).
TEST_P(EngineWideLimit, AReloadKeepsCountingTheOpenConnections) {
    NamedServer a{'a'};
    ProxyUnderTest proxy{{route({member(a.endpoint())}, 2)}, two_shards(GetParam())};
    constexpr int kClients = 5;
    Clients clients{GetParam(), proxy.endpoint(), kClients};
    EXPECT_EQ(clients.served_settled(2), 2u);
    EngineConfig next = proxy.config();
    next.routes[0].listen = proxy.engine().listen_endpoints("web"); // the same port
    next.routes[0].max_connections = 3;
    const ReloadResult result = proxy.engine().reconfigure(next);
    ASSERT_TRUE(result.applied) << (result.errors.empty() ? "" : result.errors.front());
    // Room for one more, not three.
    EXPECT_EQ(clients.served_settled(3), 3u) << proxy.stats().to_line();
    EXPECT_EQ(a.open_connections(), 3u);
    ASSERT_TRUE(clients.close_one_served());
    EXPECT_EQ(clients.served_settled(4, 100ms), 4u);
    EXPECT_EQ(clients.ended_unserved(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Steering, EngineWideLimit,
                         ::testing::Values(Steering::OneCpu, Steering::BothCpus,
                                           Steering::KernelHash),
                         [](const auto& info) { return name_of(info.param); });

} // namespace
} // namespace uringfwd::test
