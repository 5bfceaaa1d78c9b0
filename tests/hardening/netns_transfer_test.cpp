// Forwarding over real links between network namespaces (client -> proxy -> upstream),
// where loopback's shortcuts do not apply: delay, loss and reordering (netem), a
// rate-limited link that drops what overflows its queue (tbf), and small MTUs. Every
// byte must arrive intact in both directions at once.
#include "tests/hardening/netns_binary.hpp"
#include "tests/hardening/planned_server.hpp"
#include "tests/support/transfer_checks.hpp"

#include <gtest/gtest.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <chrono>
#include <fmt/core.h>
#include <string>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kSize = 8 * 1024 * 1024;
constexpr uint64_t kClientSeed = 0xC11E;
constexpr uint64_t kUpstreamSeed = 0x0B57;

class NetnsTransfer : public ::testing::Test {
protected:
    void SetUp() override {
        if (const auto& why = NetnsTopology::unavailable_reason(); !why.empty()) {
            GTEST_SKIP() << "network namespaces unavailable: " << why;
        }
    }

    // Client and upstream each send kSize while receiving the other's kSize through the
    // binary in the proxy namespace; both must get exactly what the other sent.
    // `client_mtu` below 1500 is also checked on the client's socket (its MSS), so the test
    // cannot pass over a link that silently kept the default.
    void expect_duplex_intact(const NetnsTopology& net, bool ipv6_client, milliseconds limit,
                              int client_mtu = 1500) {
        ExchangePlan upstream_plan;
        upstream_plan.send_bytes = kSize;
        upstream_plan.send_seed = kUpstreamSeed;
        PlannedServer upstream{
            listen_in(net.upstream_ns(),
                      Endpoint::parse(std::string(NetnsTopology::kUpstream4) + ":0")),
            upstream_plan, limit};
        const std::string listen = ipv6_client
                                       ? fmt::format("[{}]:0", NetnsTopology::kProxyClientSide6)
                                       : fmt::format("{}:0", NetnsTopology::kProxyClientSide4);
        RunningBinary fwd =
            start_binary_in(net.proxy_ns(), listen, upstream.endpoint().to_string());

        UniqueFd client = connect_from(net.client_ns(), fwd.endpoint);
        int mss = 0;
        socklen_t len = sizeof(mss);
        ASSERT_EQ(::getsockopt(client.get(), IPPROTO_TCP, TCP_MAXSEG, &mss, &len), 0);
        // IPv6 + TCP headers take 60 bytes of the MTU, IPv4 + TCP 40.
        EXPECT_LE(mss, client_mtu - (ipv6_client ? 60 : 40));
        ExchangePlan client_plan;
        client_plan.send_bytes = kSize;
        client_plan.send_seed = kClientSeed;
        const ExchangeResult mine = exchange(client, client_plan, Deadline{limit});
        const auto theirs = upstream.wait_results(1, Deadline{10s});
        ASSERT_EQ(theirs.size(), 1u) << "upstream never finished; stderr:\n"
                                     << fwd.process->stderr_text();
        EXPECT_TRUE(SentAll(mine, kSize));
        EXPECT_TRUE(ReceivedPayload(mine, kUpstreamSeed, kSize));
        EXPECT_TRUE(SentAll(theirs[0], kSize));
        EXPECT_TRUE(ReceivedPayload(theirs[0], kClientSeed, kSize));
        std::printf("duplex %llu MiB each way took %.2f s\n",
                    static_cast<unsigned long long>(kSize >> 20),
                    std::chrono::duration<double>(mine.elapsed).count());
    }
};

// Baseline: plain veths, so a failure in the degraded cases below is about the
// degradation, not about namespaces.
TEST_F(NetnsTransfer, DuplexIntactOverPlainVeths) {
    NetnsTopology net;
    expect_duplex_intact(net, false, 60s);
}

// Delay, 1% loss and heavy reordering on every link, in both directions.
TEST_F(NetnsTransfer, DuplexIntactUnderNetemDelayLossReorder) {
    if (const auto& why = NetnsTopology::netem_unavailable_reason(); !why.empty()) {
        GTEST_SKIP() << "netem unavailable: " << why;
    }
    NetnsTopology net;
    const std::vector<std::string> netem = {"delay", "20ms", "loss", "1%", "reorder", "25%", "50%"};
    auto add = [&](const std::string& ns, const std::string& link) {
        std::vector<std::string> argv = {"tc", "qdisc", "add", "dev", link, "root", "netem"};
        argv.insert(argv.end(), netem.begin(), netem.end());
        net.exec_in(ns, argv);
    };
    add(net.client_ns(), NetnsTopology::kClientLink);
    add(net.proxy_ns(), NetnsTopology::kProxyClientLink);
    add(net.proxy_ns(), NetnsTopology::kProxyUpstreamLink);
    add(net.upstream_ns(), NetnsTopology::kUpstreamLink);
    expect_duplex_intact(net, false, 180s);
}

// Token-bucket links (40 Mbit/s, a 32 KiB queue) on both sides of the proxy: bursts
// overflow the queue and are dropped, so TCP retransmits and the proxy sees bursty,
// stalling sockets on both ends. (Works on kernels without netem.)
TEST_F(NetnsTransfer, DuplexIntactOverRateLimitedDroppingLinks) {
    NetnsTopology net;
    const std::vector<std::string> tbf = {"tbf",  "rate",  "40mbit", "burst",
                                          "16kb", "limit", "32kb"};
    struct Link {
        std::string ns;
        const char* name;
    };
    const Link links[] = {{net.client_ns(), NetnsTopology::kClientLink},
                          {net.proxy_ns(), NetnsTopology::kProxyClientLink},
                          {net.proxy_ns(), NetnsTopology::kProxyUpstreamLink},
                          {net.upstream_ns(), NetnsTopology::kUpstreamLink}};
    for (const Link& l : links) {
        std::vector<std::string> argv = {"tc", "qdisc", "add", "dev", l.name, "root"};
        argv.insert(argv.end(), tbf.begin(), tbf.end());
        net.exec_in(l.ns, argv);
    }
    expect_duplex_intact(net, false, 60s);
    uint64_t drops = 0;
    for (const Link& l : links) {
        drops += qdisc_drops(l.ns, l.name);
    }
    std::printf("packets dropped by the tbf queues: %llu\n",
                static_cast<unsigned long long>(drops));
}

// IPv6 clients over a 1280-byte MTU link, and an IPv4 upstream over a 576-byte one:
// many small segments per pipe, and different segment sizes on the two sides.
TEST_F(NetnsTransfer, DuplexIntactWithSmallMtus) {
    NetnsTopology net{NetnsOptions{.client_mtu = 1280, .upstream_mtu = 576}};
    expect_duplex_intact(net, true, 60s, 1280);
}

} // namespace
} // namespace uringfwd::test
