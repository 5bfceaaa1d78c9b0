// Clients that wait for room at a route's max_connections own their sockets (issue
// 21): a reload that drops the route while they wait keeps them waiting on the retired
// route, and a stop then resets each of them and leaks no descriptor, counted in
// /proc/self/fd (the engine runs in this process).
#include "tests/support/proc_stats.hpp"
#include "tests/support/proxy_under_test.hpp"
#include "tests/support/sockets.hpp"

#include <gtest/gtest.h>

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <string>
#include <vector>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

RouteConfig route(std::string name, const Endpoint& upstream, std::size_t max_connections) {
    RouteConfig r;
    r.name = std::move(name);
    r.listen = {loopback_any_port()};
    UpstreamMember m;
    m.address = upstream;
    r.pool.members = {m};
    r.pool.connect_timeout = 2000ms;
    r.max_connections = max_connections;
    return r;
}

std::size_t waiting_on(Engine& engine, const std::string& name) {
    for (const RouteStats& r : engine.route_stats())
        if (r.name == name)
            return r.waiting;
    return 0;
}

// What the client side of a connection sees within `deadline`: 0 for an orderly end,
// the errno of a failed recv (ECONNRESET for a reset), or -1 for nothing yet.
int end_seen(int fd, const Deadline& deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, deadline.poll_timeout_ms()) != 1)
        return -1;
    char byte = 0;
    ssize_t n = ::recv(fd, &byte, 1, MSG_DONTWAIT);
    return n == 0 ? 0 : n < 0 ? errno : -1;
}

TEST(WaitingClients, ARouteDroppedWhileClientsWaitLeaksNoDescriptor) {
    constexpr int kWaiting = 5;
    // An upstream that never accepts: the kernel completes the connect into its
    // backlog, so the first connection stays open and holds the route's one unit.
    Listener upstream = listen_loopback(Family::Inet4);
    Listener gateway = listen_loopback(Family::Inet4);
    std::vector<UniqueFd> clients;
    const int fds_before = count_open_fds();
    {
        ProxyUnderTest proxy{{route("web", upstream.endpoint(), 1)}};
        // Handed over, so none waits in a listen backlog: the engine holds them all.
        for (int i = 0; i < 1 + kWaiting; ++i) {
            clients.push_back(connect_to(gateway.endpoint()));
            UniqueFd accepted = accept_one(gateway.fd(), Deadline{5s});
            ASSERT_FALSE(proxy.engine().forward(accepted.get(), "web"));
            (void)accepted.release(); // the engine's now
        }
        ASSERT_TRUE(
            eventually([&] { return waiting_on(proxy.engine(), "web") == kWaiting; }, Deadline{5s}))
            << "waiting: " << waiting_on(proxy.engine(), "web");

        // The route goes; its clients stay waiting on it, retired.
        EngineConfig next = proxy.config();
        next.routes = {route("other", upstream.endpoint(), 0)};
        const ReloadResult reload = proxy.engine().reconfigure(next);
        ASSERT_TRUE(reload.applied) << (reload.errors.empty() ? "" : reload.errors[0]);
        EXPECT_EQ(waiting_on(proxy.engine(), "web"), static_cast<std::size_t>(kWaiting));

        proxy.engine().stop(0ms);
        // The waiting ones are cut before their stream began: a reset, not an end.
        for (int i = 1; i <= kWaiting; ++i)
            EXPECT_EQ(end_seen(clients[i].get(), Deadline{5s}), ECONNRESET) << "client " << i;
    }
    clients.clear();
    EXPECT_TRUE(eventually([&] { return count_open_fds() == fds_before; }, Deadline{5s}))
        << "fds before: " << fds_before << ", after: " << count_open_fds();
}

} // namespace
} // namespace uringfwd::test
