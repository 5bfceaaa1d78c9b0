// Socket controls (RouteConfig: keepalive, user timeout, mark, tos, source) read back
// from the live sockets: with plain fds the engine's sockets are in this process's fd
// table, found by their addresses, and asked with getsockopt(2); with direct descriptors
// they are in the ring's file table only, so the kernel's socket diagnostics (ss) show
// what the ring's setsockopt left on them. The upstream sees the source address it is
// connected from.
#include "tests/support/binary_process.hpp"
#include "tests/support/eventually.hpp"
#include "tests/support/proxy_under_test.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/temp_config_file.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

int option(int fd, int level, int name) {
    int value = -1;
    socklen_t len = sizeof(value);
    if (::getsockopt(fd, level, name, &value, &len) != 0)
        return -1;
    return value;
}

std::string ipv4_text(const sockaddr_storage& ss) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(ss);
    char host[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &in.sin_addr, host, sizeof(host));
    return fmt::format("{}:{}", host, ntohs(in.sin_port));
}

std::string local_text(int fd) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
    return ipv4_text(ss);
}

std::string peer_text(int fd) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    ::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len);
    return ipv4_text(ss);
}

std::string peer_host(int fd) {
    const std::string text = peer_text(fd);
    return text.substr(0, text.rfind(':'));
}

// What ss says of the one established TCP socket from `local` to `peer`: timers (-o),
// socket details with the mark (-e), TOS (--tos); "" when it lists none.
std::string ss_line(const std::string& local, const std::string& peer) {
    const std::string command =
        fmt::format("ss -Htnieo --tos state established src {} dst {} 2>/dev/null", local, peer);
    std::FILE* pipe = ::popen(command.c_str(), "r");
    if (pipe == nullptr)
        return {};
    std::string out;
    char buffer[4096];
    while (std::size_t n = std::fread(buffer, 1, sizeof(buffer), pipe))
        out.append(buffer, n);
    ::pclose(pipe);
    return out;
}

RouteConfig route_to(const Endpoint& upstream) {
    RouteConfig route;
    route.name = "controls";
    route.listen = {Endpoint::parse("127.0.0.1:0")};
    route.pool.members = {{upstream}};
    route.pool.connect_timeout = 2s;
    return route;
}

// Every control at values no default has, to be told from what a kernel or a listener
// would give.
RouteConfig controlled_route(const Endpoint& upstream) {
    RouteConfig route = route_to(upstream);
    route.client_keepalive = TcpKeepalive{45s, 7s, 4u};
    route.upstream_keepalive = TcpKeepalive{50s, 8s, 5u};
    route.client_user_timeout = 12s;
    route.upstream_user_timeout = 13s;
    route.mark = 42;
    route.tos = 0x28; // DSCP AF11
    return route;
}

// A connection through the proxy with a byte through it, so both its sockets exist.
struct Through {
    UniqueFd client;
    UniqueFd server_side;
};

Through connect_through(ProxyUnderTest& proxy, const Listener& upstream) {
    Through t;
    t.client = connect_to(proxy.endpoint());
    t.server_side = accept_one(upstream.fd(), Deadline{5s});
    EXPECT_EQ(send_text(t.client.get(), "x", Deadline{5s}).status, IoStatus::Ok);
    std::byte got{};
    EXPECT_EQ(recv_all(t.server_side.get(), {&got, 1}, Deadline{5s}).status, IoStatus::Ok);
    return t;
}

TEST(SocketControls, KeepaliveUserTimeoutMarkAndTosAreOnTheLiveSockets) {
    Listener upstream = listen_loopback(Family::Inet4);
    ProxyUnderTest proxy({controlled_route(upstream.endpoint())}, [](EngineConfig& c) {
        c.placement.shards = 1;
        c.ring.direct_descriptors = DirectDescriptors::Off; // its sockets are our fds
    });
    Through t = connect_through(proxy, upstream);

    const std::optional<int> client = fd_connected_to(t.client.get());
    const std::optional<int> up = fd_connected_to(t.server_side.get());
    ASSERT_TRUE(client.has_value()) << "no socket of the engine's faces the client";
    ASSERT_TRUE(up.has_value()) << "no socket of the engine's faces the upstream";

    EXPECT_EQ(option(*client, SOL_SOCKET, SO_KEEPALIVE), 1);
    EXPECT_EQ(option(*client, IPPROTO_TCP, TCP_KEEPIDLE), 45);
    EXPECT_EQ(option(*client, IPPROTO_TCP, TCP_KEEPINTVL), 7);
    EXPECT_EQ(option(*client, IPPROTO_TCP, TCP_KEEPCNT), 4);
    EXPECT_EQ(option(*client, IPPROTO_TCP, TCP_USER_TIMEOUT), 12000);
    // mark and tos are the upstream's only.
    EXPECT_EQ(option(*client, SOL_SOCKET, SO_MARK), 0);
    EXPECT_EQ(option(*client, IPPROTO_IP, IP_TOS), 0);

    EXPECT_EQ(option(*up, SOL_SOCKET, SO_KEEPALIVE), 1);
    EXPECT_EQ(option(*up, IPPROTO_TCP, TCP_KEEPIDLE), 50);
    EXPECT_EQ(option(*up, IPPROTO_TCP, TCP_KEEPINTVL), 8);
    EXPECT_EQ(option(*up, IPPROTO_TCP, TCP_KEEPCNT), 5);
    EXPECT_EQ(option(*up, IPPROTO_TCP, TCP_USER_TIMEOUT), 13000);
    EXPECT_EQ(option(*up, SOL_SOCKET, SO_MARK), 42);
    EXPECT_EQ(option(*up, IPPROTO_IP, IP_TOS), 0x28);
}

TEST(SocketControls, WithoutControlsTheSocketsKeepTheKernelsDefaults) {
    // The control for the test above: nothing asked, nothing set.
    Listener upstream = listen_loopback(Family::Inet4);
    ProxyUnderTest proxy({route_to(upstream.endpoint())}, [](EngineConfig& c) {
        c.placement.shards = 1;
        c.ring.direct_descriptors = DirectDescriptors::Off;
    });
    Through t = connect_through(proxy, upstream);
    const std::optional<int> client = fd_connected_to(t.client.get());
    const std::optional<int> up = fd_connected_to(t.server_side.get());
    ASSERT_TRUE(client.has_value() && up.has_value());
    for (int fd : {*client, *up}) {
        EXPECT_EQ(option(fd, SOL_SOCKET, SO_KEEPALIVE), 0);
        EXPECT_EQ(option(fd, IPPROTO_TCP, TCP_USER_TIMEOUT), 0);
        EXPECT_EQ(option(fd, SOL_SOCKET, SO_MARK), 0);
        EXPECT_EQ(option(fd, IPPROTO_IP, IP_TOS), 0);
    }
}

TEST(SocketControls, TheRingSetsThemOnDirectDescriptors) {
    Listener upstream = listen_loopback(Family::Inet4);
    ProxyUnderTest proxy({controlled_route(upstream.endpoint())}, [](EngineConfig& c) {
        c.placement.shards = 1;
        c.ring.direct_descriptors = DirectDescriptors::On;
    });
    Through t = connect_through(proxy, upstream);
    ASSERT_GE(proxy.stats().direct_slots, 2u) << "the sockets are not in the ring's table";

    const std::string engine_client =
        ss_line(peer_text(t.client.get()), local_text(t.client.get()));
    const std::string engine_upstream =
        ss_line(peer_text(t.server_side.get()), local_text(t.server_side.get()));
    const std::string test_client = ss_line(local_text(t.client.get()), peer_text(t.client.get()));
    ASSERT_NE(test_client, "") << "ss lists no socket (is it installed?)";
    // The test's own client has no keepalive: its line is the control.
    EXPECT_EQ(test_client.find("timer:(keepalive"), std::string::npos) << test_client;

    EXPECT_NE(engine_client.find("timer:(keepalive"), std::string::npos) << engine_client;
    EXPECT_EQ(engine_client.find("fwmark:"), std::string::npos) << engine_client;
    EXPECT_NE(engine_upstream.find("timer:(keepalive"), std::string::npos) << engine_upstream;
    EXPECT_NE(engine_upstream.find("fwmark:0x2a"), std::string::npos) << engine_upstream;
    EXPECT_NE(engine_upstream.find("tos:0x28"), std::string::npos) << engine_upstream;
    EXPECT_EQ(proxy.stats().closed_local_error, 0u);
}

// The upstream sees connections from `source` (the route's, or a member's own), on plain
// fds and with direct descriptors on (its upstream sockets are plain fds then).
class SourceAddress : public ::testing::TestWithParam<DirectDescriptors> {};

TEST_P(SourceAddress, TheUpstreamSeesTheConfiguredSource) {
    Listener upstream = listen_loopback(Family::Inet4);
    RouteConfig route = route_to(upstream.endpoint());
    route.source = {"127.0.0.5"};
    ProxyUnderTest proxy({route}, [](EngineConfig& c) {
        c.placement.shards = 1;
        c.ring.direct_descriptors = GetParam();
    });
    for (int i = 0; i < 2; ++i) {
        Through t = connect_through(proxy, upstream);
        EXPECT_EQ(peer_host(t.server_side.get()), "127.0.0.5");
        // Echoed back: the connection works from its source address.
        ASSERT_EQ(send_text(t.server_side.get(), "y", Deadline{5s}).status, IoStatus::Ok);
        std::byte got{};
        EXPECT_EQ(recv_all(t.client.get(), {&got, 1}, Deadline{5s}).status, IoStatus::Ok);
    }
}

TEST_P(SourceAddress, AListTakesTurnsPerConnection) {
    Listener upstream = listen_loopback(Family::Inet4);
    RouteConfig route = route_to(upstream.endpoint());
    route.source = {"127.0.0.5", "127.0.0.6", "::1"}; // the IPv6 one is not for this upstream
    ProxyUnderTest proxy({route}, [](EngineConfig& c) {
        c.placement.shards = 1;
        c.ring.direct_descriptors = GetParam();
    });
    std::vector<std::string> seen;
    for (int i = 0; i < 4; ++i)
        seen.push_back(peer_host(connect_through(proxy, upstream).server_side.get()));
    EXPECT_EQ(seen, (std::vector<std::string>{"127.0.0.5", "127.0.0.6", "127.0.0.5", "127.0.0.6"}));
}

TEST_P(SourceAddress, AMembersSourceReplacesTheRoutes) {
    Listener upstream = listen_loopback(Family::Inet4);
    RouteConfig route = route_to(upstream.endpoint());
    route.source = {"127.0.0.5"};
    route.pool.members[0].source = {"127.0.0.7"};
    ProxyUnderTest proxy({route}, [](EngineConfig& c) {
        c.placement.shards = 1;
        c.ring.direct_descriptors = GetParam();
    });
    EXPECT_EQ(peer_host(connect_through(proxy, upstream).server_side.get()), "127.0.0.7");
}

TEST_P(SourceAddress, ASourceNotOnThisHostFailsTheConnectAsARefusalWould) {
    Listener upstream = listen_loopback(Family::Inet4);
    RouteConfig route = route_to(upstream.endpoint());
    route.source = {"192.0.2.1"}; // TEST-NET-1: no interface of this host has it
    route.pool.retries = 0;
    ProxyUnderTest proxy({route}, [](EngineConfig& c) {
        c.placement.shards = 1;
        c.ring.direct_descriptors = GetParam();
    });
    // The bind fails at once, so the proxy's reset can reach the client before its own
    // connect() has returned: that is the same outcome as a reset on the first read.
    UniqueFd client;
    const int connect_error = try_connect(proxy.endpoint(), 5000ms, client);
    if (connect_error == 0) {
        std::byte got{};
        const IoResult r = recv_all(client.get(), {&got, 1}, Deadline{5s});
        EXPECT_TRUE(r.ended_by_peer()) << to_string(r.status);
    } else {
        EXPECT_EQ(connect_error, ECONNRESET) << std::strerror(connect_error);
    }
    EXPECT_TRUE(eventually([&] { return proxy.stats().closed_refused == 1; }, Deadline{5s}))
        << "closed_refused " << proxy.stats().closed_refused;
    EXPECT_TRUE(proxy.logs("to source 192.0.2.1 (Cannot assign requested address)", Deadline{2s}));
    // Nothing reached the upstream.
    pollfd p{upstream.fd(), POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 0), 0);
}

INSTANTIATE_TEST_SUITE_P(Descriptors, SourceAddress,
                         ::testing::Values(DirectDescriptors::Off, DirectDescriptors::On),
                         [](const auto& info) {
                             return info.param == DirectDescriptors::On ? "Direct" : "Plain";
                         });

// A route key that needs CAP_NET_ADMIN (or CAP_NET_RAW), and the line a start without
// either must stop with.
struct CapabilityCase {
    const char* name;
    const char* key;
    const char* reason;
};

class SocketControlsWithoutCapability : public ::testing::TestWithParam<CapabilityCase> {};

TEST_P(SocketControlsWithoutCapability, TheStartStopsWithTheReason) {
    if (::access("/usr/bin/setpriv", X_OK) != 0)
        GTEST_SKIP() << "setpriv (util-linux) is not installed";
    Listener upstream = listen_loopback(Family::Inet4);
    ConfigFile file(fmt::format("[[route]]\nname = \"web\"\nlisten = \"127.0.0.1:0\"\n{}\n"
                                "  [[route.upstream]]\n  address = \"{}\"\n",
                                GetParam().key, upstream.endpoint().to_string()));
    // Both capabilities that allow the option out of the bounding set: the binary, root
    // or not, runs without them.
    BinaryProcess binary("/usr/bin/setpriv", {"--bounding-set", "-net_admin,-net_raw", "--inh-caps",
                                              "-net_admin,-net_raw", "--", uring_fwd_binary(),
                                              "--config", file.path()});
    const std::optional<ExitStatus> status = binary.wait_exit(Deadline{10s});
    ASSERT_TRUE(status.has_value()) << "still running: " << binary.stderr_text();
    EXPECT_TRUE(status->exited && status->code != 0) << status->describe();
    EXPECT_NE(binary.stderr_text().find(GetParam().reason), std::string::npos)
        << binary.stderr_text();
}

INSTANTIATE_TEST_SUITE_P(
    Keys, SocketControlsWithoutCapability,
    ::testing::Values(CapabilityCase{"Mark", "mark = 7",
                                     "route \"web\": mark = 7: setsockopt(SO_MARK): Operation "
                                     "not permitted; it needs CAP_NET_ADMIN (or CAP_NET_RAW)"},
                      CapabilityCase{"Transparent", "transparent = true",
                                     "route \"web\": transparent = true: "
                                     "setsockopt(IP_TRANSPARENT): Operation not permitted; it "
                                     "needs CAP_NET_ADMIN (or CAP_NET_RAW)"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(SocketControlsBinary, CheckNamesTheLineOfABadValue) {
    ConfigFile file("[[route]]\nname = \"web\"\nlisten = \"127.0.0.1:0\"\ntos = 300\n"
                    "source = \"127.0.0.1:80\"\n"
                    "client_keepalive = { count = 0 }\n"
                    "  [[route.upstream]]\n  address = \"127.0.0.1:9\"\n");
    BinaryProcess check(uring_fwd_binary(), {"--config", file.path(), "--check"});
    const std::optional<ExitStatus> status = check.wait_exit(Deadline{10s});
    ASSERT_TRUE(status.has_value());
    EXPECT_TRUE(status->exited && status->code == 1) << status->describe();
    const std::string err = check.stderr_text();
    EXPECT_NE(err.find(file.path() + ":4: route \"web\": tos must be 0..255, not 300"),
              std::string::npos)
        << err;
    EXPECT_NE(err.find(file.path() + ":5: route \"web\": source \"127.0.0.1:80\": not an IP "
                                     "address"),
              std::string::npos)
        << err;
    EXPECT_NE(err.find(file.path() + ":6: route \"web\": client_keepalive count must be 1..127, "
                                     "not 0"),
              std::string::npos)
        << err;
}

} // namespace
} // namespace uringfwd::test
