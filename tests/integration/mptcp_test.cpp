// mptcp = true over real sockets (README "MPTCP"): an MPTCP client through a route whose
// listener is MPTCP, to a member the engine connects to with MPTCP, moves 64 MiB each
// way intact; both of the engine's sockets are MPTCP (SO_PROTOCOL, and `ss -M` lists the
// connections); plain TCP clients are still served on that listener, and an MPTCP member
// that speaks only TCP is still reached. Runs on every data path the suite is run with
// (URING_FWD_TEST_DATA_PATH). Skips where the kernel has no MPTCP for this namespace.
#include "tests/support/exchange.hpp"
#include "tests/support/payload.hpp"
#include "tests/support/proxy_under_test.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <future>
#include <string>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kBytes = 64ull << 20;

bool mptcp_enabled() {
    std::ifstream in("/proc/sys/net/mptcp/enabled");
    int on = 0;
    return in >> on && on == 1;
}

int protocol_of(int fd) {
    int v = -1;
    socklen_t len = sizeof(v);
    ::getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &v, &len);
    return v;
}

// A listening socket on 127.0.0.1, MPTCP when `protocol` is IPPROTO_MPTCP.
Listener loopback_listener(int protocol) {
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, protocol));
    if (!fd.valid())
        throw std::runtime_error(fmt::format("socket: {}", std::strerror(errno)));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
        ::listen(fd.get(), 16) != 0 ||
        ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0)
        throw std::runtime_error(fmt::format("listen: {}", std::strerror(errno)));
    return Listener(std::move(fd), Endpoint{Endpoint::Kind::Inet, "127.0.0.1", ntohs(a.sin_port)});
}

// A blocking client of `protocol` connected to `to`.
UniqueFd connect_with(int protocol, const Endpoint& to) {
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, protocol));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(to.port);
    ::inet_pton(AF_INET, to.host.c_str(), &a.sin_addr);
    if (!fd.valid() || ::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0)
        throw std::runtime_error(
            fmt::format("connect {}: {}", to.to_string(), std::strerror(errno)));
    return fd;
}

// The MPTCP sockets `ss -M` lists with this local or peer port, counted.
int ss_mptcp_lines(uint16_t port) {
    const std::string command = fmt::format(
        "ss -HMn state established '( sport = :{0} or dport = :{0} )' 2>/dev/null", port);
    std::FILE* pipe = ::popen(command.c_str(), "r");
    if (pipe == nullptr)
        return -1;
    int lines = 0;
    char buf[512];
    while (std::fgets(buf, sizeof(buf), pipe) != nullptr)
        ++lines;
    ::pclose(pipe);
    return lines;
}

RouteConfig mptcp_route(const Endpoint& upstream) {
    RouteConfig route;
    route.name = "mp";
    route.listen = {Endpoint::parse("127.0.0.1:0")};
    route.mptcp = true;
    UpstreamMember member;
    member.address = upstream;
    member.mptcp = true;
    route.pool.members = {member};
    return route;
}

// 64 MiB each way at once between `client` and `server_side`, checked by SHA-256.
void expect_duplex_intact(UniqueFd& client, UniqueFd& server_side) {
    ExchangePlan from_client;
    from_client.send_bytes = kBytes;
    from_client.send_seed = 11;
    ExchangePlan from_server = from_client;
    from_server.send_seed = 22;
    auto server = std::async(std::launch::async,
                             [&] { return exchange(server_side, from_server, Deadline{60s}); });
    const ExchangeResult c = exchange(client, from_client, Deadline{60s});
    const ExchangeResult s = server.get();
    EXPECT_EQ(c.received, kBytes) << c.describe();
    EXPECT_EQ(s.received, kBytes) << s.describe();
    EXPECT_EQ(c.received_sha256, payload_sha256(22, kBytes));
    EXPECT_EQ(s.received_sha256, payload_sha256(11, kBytes));
}

class Mptcp : public ::testing::Test {
protected:
    void SetUp() override {
        if (!mptcp_enabled())
            GTEST_SKIP() << "net.mptcp.enabled is not 1 in this namespace (or no MPTCP)";
    }
};

TEST_F(Mptcp, AnMptcpClientThroughAnMptcpRouteMoves64MiBEachWayIntact) {
    Listener upstream = loopback_listener(IPPROTO_MPTCP);
    ProxyUnderTest proxy({mptcp_route(upstream.endpoint())});
    UniqueFd client = connect_with(IPPROTO_MPTCP, proxy.endpoint());
    UniqueFd server_side = accept_one(upstream.fd(), Deadline{5s});
    EXPECT_EQ(protocol_of(client.get()), IPPROTO_MPTCP);
    // The upstream accepted an MPTCP connection: the engine connected with MPTCP.
    EXPECT_EQ(protocol_of(server_side.get()), IPPROTO_MPTCP);
    // Both of the engine's connections are MPTCP ones the kernel lists: the client's
    // (to the listener's port) and the upstream's (to the member's).
    EXPECT_GE(ss_mptcp_lines(proxy.endpoint().port), 1)
        << "ss -M lists no MPTCP socket on the listener";
    EXPECT_GE(ss_mptcp_lines(upstream.endpoint().port), 1)
        << "ss -M lists no MPTCP socket to the member";
    expect_duplex_intact(client, server_side);
}

TEST_F(Mptcp, APlainTcpClientOnAnMptcpListenerIsServedAsTcp) {
    Listener upstream = loopback_listener(IPPROTO_MPTCP);
    ProxyUnderTest proxy({mptcp_route(upstream.endpoint())});
    UniqueFd client = connect_with(0, proxy.endpoint());
    UniqueFd server_side = accept_one(upstream.fd(), Deadline{5s});
    EXPECT_EQ(protocol_of(client.get()), IPPROTO_TCP);
    expect_duplex_intact(client, server_side);
}

TEST_F(Mptcp, AnMptcpMemberThatSpeaksOnlyTcpIsReachedOverTcp) {
    Listener upstream = loopback_listener(0);
    ProxyUnderTest proxy({mptcp_route(upstream.endpoint())});
    UniqueFd client = connect_with(IPPROTO_MPTCP, proxy.endpoint());
    UniqueFd server_side = accept_one(upstream.fd(), Deadline{5s});
    EXPECT_EQ(protocol_of(server_side.get()), IPPROTO_TCP);
    expect_duplex_intact(client, server_side);
}

} // namespace
} // namespace uringfwd::test
