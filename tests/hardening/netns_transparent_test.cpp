// transparent = true over real links (README "Transparent proxying"): client, proxy and
// upstream in namespaces of their own (netns_topology.hpp), the upstream's replies to the
// client's subnet routed back through the proxy (its default route) and delivered to the
// proxy's own sockets there by the policy route the README gives. The upstream must see
// the client's own address, not the proxy's. (Without the capability the start stops with
// the reason: tests/integration/socket_controls_test.cpp.)
#include "tests/hardening/netns_binary.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/temp_config_file.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <fmt/format.h>

#include <span>
#include <string>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

// The IPv4 address of the socket's peer, as text.
std::string peer_ip(int fd) {
    sockaddr_in peer{};
    socklen_t len = sizeof(peer);
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0)
        return "?";
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &peer.sin_addr, text, sizeof(text));
    return text;
}

std::string config_for(const Endpoint& upstream) {
    return fmt::format("[[route]]\nname = \"tp\"\nlisten = \"{}:0\"\ntransparent = true\n"
                       "  [[route.upstream]]\n  address = \"{}\"\n",
                       NetnsTopology::kProxyClientSide4, upstream.to_string());
}

class NetnsTransparent : public ::testing::Test {
protected:
    void SetUp() override {
        if (const auto& why = NetnsTopology::unavailable_reason(); !why.empty())
            GTEST_SKIP() << "network namespaces unavailable: " << why;
    }
};

TEST_F(NetnsTransparent, TheUpstreamSeesTheClientsOwnAddress) {
    NetnsTopology net;
    // README "Transparent proxying": what comes back from the upstream link for the
    // clients' subnet is for this host's (transparent) sockets, not to be forwarded.
    net.exec_in(net.proxy_ns(), {"ip", "rule", "add", "iif", NetnsTopology::kProxyUpstreamLink,
                                 "lookup", "100", "pref", "100"});
    net.exec_in(net.proxy_ns(),
                {"ip", "route", "add", "local", "10.200.1.0/24", "dev", "lo", "table", "100"});
    Listener upstream =
        listen_in(net.upstream_ns(), Endpoint{Endpoint::Kind::Inet, NetnsTopology::kUpstream4, 0});
    ConfigFile file(config_for(upstream.endpoint()));
    RunningBinary proxy = start_binary_with_config_in(net.proxy_ns(), file.path());

    UniqueFd client = connect_from(net.client_ns(), proxy.endpoint);
    UniqueFd server_side = accept_one(upstream.fd(), Deadline{5s});
    EXPECT_EQ(peer_ip(server_side.get()), NetnsTopology::kClient4)
        << "the upstream saw the proxy's address, not the client's";
    // Both ways over the transparent connection.
    ASSERT_EQ(send_text(client.get(), "ping", Deadline{5s}).status, IoStatus::Ok);
    char buf[4];
    ASSERT_EQ(
        recv_all(server_side.get(), std::as_writable_bytes(std::span(buf)), Deadline{5s}).status,
        IoStatus::Ok);
    EXPECT_EQ(std::string(buf, 4), "ping");
    ASSERT_EQ(send_text(server_side.get(), "pong", Deadline{5s}).status, IoStatus::Ok);
    ASSERT_EQ(recv_all(client.get(), std::as_writable_bytes(std::span(buf)), Deadline{5s}).status,
              IoStatus::Ok);
    EXPECT_EQ(std::string(buf, 4), "pong");
}

} // namespace
} // namespace uringfwd::test
