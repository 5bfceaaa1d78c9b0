// The same forwarding between address families: TCP to Unix, Unix to TCP, Unix to
// Unix and IPv6 loopback. Splice works on any stream socket; these catch
// family-specific set-up mistakes (address lengths, socket options TCP-only).
#include "tests/support/exchange.hpp"
#include "tests/support/proxy_under_test.hpp"
#include "tests/support/scripted_peer.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/transfer_checks.hpp"

#include <gtest/gtest.h>

#include <chrono>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kSize = 4 * 1024 * 1024;

Endpoint unix_endpoint(const std::string& tag) {
    Endpoint ep;
    ep.kind = Endpoint::Kind::Unix;
    ep.host = unique_unix_path(tag);
    return ep;
}

Endpoint ipv6_loopback() {
    Endpoint ep;
    ep.kind = Endpoint::Kind::Inet6;
    ep.host = "::1";
    return ep;
}

// 4 MiB each way at once between a client on `listen` and a peer of `upstream_family`.
void expect_duplex(Family upstream_family, std::optional<Endpoint> listen) {
    ExchangePlan upstream_plan;
    upstream_plan.send_bytes = kSize;
    upstream_plan.send_seed = 101;
    ScriptedPeer peer{upstream_plan, upstream_family};
    ProxyUnderTest proxy(peer.endpoint(), [&](EngineConfig& c) {
        if (listen)
            c.listen = *listen;
    });

    UniqueFd client = connect_to(proxy.endpoint());
    ExchangePlan client_plan;
    client_plan.send_bytes = kSize;
    client_plan.send_seed = 102;
    const ExchangeResult mine = exchange(client, client_plan, Deadline{30s});
    EXPECT_TRUE(BothWaysIntact(mine, client_plan, peer, upstream_plan));
}

TEST(AddressFamily, TcpToUnix) {
    expect_duplex(Family::Unix, std::nullopt);
}

TEST(AddressFamily, UnixToTcp) {
    expect_duplex(Family::Inet4, unix_endpoint("listen"));
}

TEST(AddressFamily, UnixToUnix) {
    expect_duplex(Family::Unix, unix_endpoint("listen"));
}

TEST(AddressFamily, Ipv6Loopback) {
    if (!ipv6_loopback_available()) {
        GTEST_SKIP() << "cannot bind [::1] here (IPv6 disabled)";
    }
    expect_duplex(Family::Inet6, ipv6_loopback());
}

TEST(AddressFamily, Ipv6ToIpv4) {
    if (!ipv6_loopback_available()) {
        GTEST_SKIP() << "cannot bind [::1] here (IPv6 disabled)";
    }
    expect_duplex(Family::Inet4, ipv6_loopback());
}

} // namespace
} // namespace uringfwd::test
