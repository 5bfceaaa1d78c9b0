// An upstream that never answers a SYN, behind a real link: the binary must give up at
// --connect-timeout, reset the client and say why, instead of holding the client open.
#include "tests/hardening/netns_binary.hpp"
#include "tests/support/socket_io.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <fmt/core.h>
#include <thread>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

class NetnsBlackhole : public ::testing::Test {
protected:
    void SetUp() override {
        if (const auto& why = NetnsTopology::unavailable_reason(); !why.empty()) {
            GTEST_SKIP() << "network namespaces unavailable: " << why;
        }
    }

    // Connects a client through `fwd` and expects it to be closed 1-3 s later (the
    // connect timeout is 1 s), with the binary logging the upstream and the timeout.
    void expect_client_closed_after_timeout(const NetnsTopology& net, RunningBinary& fwd,
                                            const std::string& upstream) {
        const auto start = Clock::now();
        UniqueFd client = connect_from(net.client_ns(), fwd.endpoint);
        const IoResult r = recv_until_eof(client.get(), Deadline{10s});
        const auto took = std::chrono::duration<double>(Clock::now() - start).count();
        EXPECT_TRUE(r.ended_by_peer()) << "client not closed: " << to_string(r.status);
        EXPECT_EQ(r.bytes, 0u);
        EXPECT_LT(took, 3.0) << "the client was held past the 1 s connect timeout";
        EXPECT_GT(took, 0.8) << "gave up before the connect timeout";
        // The warning may trail the reset by a moment.
        const std::string expected = fmt::format("upstream {}", upstream);
        for (int i = 0; i < 100 && fwd.process->stderr_text().find(expected) == std::string::npos;
             ++i) {
            std::this_thread::sleep_for(10ms);
        }
        const std::string err = fwd.process->stderr_text();
        EXPECT_NE(err.find(expected), std::string::npos) << err;
        EXPECT_NE(err.find("no answer within 1000 ms"), std::string::npos) << err;
        std::printf("client closed after %.2f s (%s)\n", took, to_string(r.status).c_str());
    }
};

// The upstream address is on the link but no host has it: ARP never resolves, the SYN
// is never even sent.
TEST_F(NetnsBlackhole, UpstreamAddressWithNoHost) {
    NetnsTopology net;
    const std::string upstream = fmt::format("{}:8080", NetnsTopology::kNoHost4);
    RunningBinary fwd =
        start_binary_in(net.proxy_ns(), fmt::format("{}:0", NetnsTopology::kProxyClientSide4),
                        upstream, {"--connect-timeout", "1s"});
    expect_client_closed_after_timeout(net, fwd, upstream);
    // The binary survives and keeps serving (and failing) the next client the same way.
    expect_client_closed_after_timeout(net, fwd, upstream);
}

// The upstream host exists and its neighbour entry is known, but its link drops every
// packet (netem loss 100%): SYNs leave and vanish.
TEST_F(NetnsBlackhole, UpstreamLinkDropsEverything) {
    if (const auto& why = NetnsTopology::netem_unavailable_reason(); !why.empty()) {
        GTEST_SKIP() << "netem unavailable: " << why;
    }
    NetnsTopology net;
    net.exec_in(net.upstream_ns(), {"tc", "qdisc", "add", "dev", NetnsTopology::kUpstreamLink,
                                    "root", "netem", "loss", "100%"});
    const std::string upstream = fmt::format("{}:8080", NetnsTopology::kUpstream4);
    RunningBinary fwd =
        start_binary_in(net.proxy_ns(), fmt::format("{}:0", NetnsTopology::kProxyClientSide4),
                        upstream, {"--connect-timeout", "1s"});
    expect_client_closed_after_timeout(net, fwd, upstream);
}

// Without netem: the upstream host goes silent at the link level (its interface is
// down, so the proxy's side has no carrier and everything sent there is discarded).
TEST_F(NetnsBlackhole, UpstreamLinkDown) {
    NetnsTopology net;
    net.exec_in(net.upstream_ns(),
                {"ip", "link", "set", "dev", NetnsTopology::kUpstreamLink, "down"});
    const std::string upstream = fmt::format("{}:8080", NetnsTopology::kUpstream4);
    RunningBinary fwd =
        start_binary_in(net.proxy_ns(), fmt::format("{}:0", NetnsTopology::kProxyClientSide4),
                        upstream, {"--connect-timeout", "1s"});
    expect_client_closed_after_timeout(net, fwd, upstream);
}

} // namespace
} // namespace uringfwd::test
