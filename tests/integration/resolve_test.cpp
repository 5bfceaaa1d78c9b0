// A pool member given by host name follows the name: looked up again every
// resolve_interval, its new address serves new clients; a failed lookup keeps the last
// answer. The name lives in /etc/hosts for the test ("hosts: files" is glibc's first
// source), restored afterwards.
#include "tests/support/named_server.hpp"
#include "tests/support/proc_stats.hpp"
#include "tests/support/proxy_under_test.hpp"
#include "tests/support/sockets.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

constexpr const char* kHosts = "/etc/hosts";
constexpr const char* kName = "uringfwd-resolve-test";

// One line of /etc/hosts for kName while it lives; the file as it was afterwards.
class HostsEntry {
public:
    HostsEntry() {
        std::ifstream in(kHosts);
        std::stringstream text;
        text << in.rdbuf();
        original_ = text.str();
        if (!original_.empty() && original_.back() != '\n')
            original_ += '\n';
    }
    ~HostsEntry() { std::ofstream(kHosts, std::ios::trunc) << original_; }
    void point_at(const std::string& ip, const char* name = kName) const {
        std::ofstream(kHosts, std::ios::trunc) << original_ << ip << " " << name << "\n";
    }
    void remove() const { std::ofstream(kHosts, std::ios::trunc) << original_; }

private:
    std::string original_;
};

TEST(Resolve, PoolFollowsANameToItsNewAddress) {
    if (::access(kHosts, W_OK) != 0)
        GTEST_SKIP() << "cannot write " << kHosts << " (not root?)";
    NamedServer first{'1'};
    const uint16_t port = first.endpoint().port;
    std::optional<NamedServer> second;
    try {
        second.emplace('2', Endpoint::parse(fmt::format("127.0.0.2:{}", port)));
    } catch (const std::exception& e) {
        GTEST_SKIP() << "cannot listen on 127.0.0.2:" << port << ": " << e.what();
    }
    HostsEntry hosts;
    hosts.point_at("127.0.0.1");

    RouteConfig route;
    route.name = "named";
    route.listen = {loopback_any_port()};
    UpstreamMember member;
    member.address = Endpoint::parse(fmt::format("{}:{}", kName, port));
    route.pool.members = {member};
    route.pool.resolve_interval = 100ms;
    ProxyUnderTest proxy{{route}};
    EXPECT_EQ(name_through(proxy.endpoint(), Deadline{5s}), '1');

    hosts.point_at("127.0.0.2");
    EXPECT_TRUE(eventually([&] { return name_through(proxy.endpoint(), Deadline{5s}) == '2'; },
                           Deadline{5s}))
        << "the pool never followed the name to 127.0.0.2";

    // The name stops resolving: the last answer stays, and it is said once.
    hosts.remove();
    EXPECT_TRUE(proxy.logs("keeping the last answer", Deadline{5s}));
    EXPECT_EQ(name_through(proxy.endpoint(), Deadline{5s}), '2');
}

// A name with only an AAAA record is an upstream too.
TEST(Resolve, ANameWithOnlyAnIpv6AddressIsReached) {
    if (::access(kHosts, W_OK) != 0)
        GTEST_SKIP() << "cannot write " << kHosts << " (not root?)";
    if (!ipv6_loopback_available())
        GTEST_SKIP() << "no IPv6 loopback here";
    NamedServer v6{'6', Endpoint::parse("[::1]:0")};
    HostsEntry hosts;
    hosts.point_at("::1", "uringfwd-resolve-test-v6");
    RouteConfig route;
    route.name = "v6";
    route.listen = {loopback_any_port()};
    UpstreamMember member;
    member.address =
        Endpoint::parse(fmt::format("uringfwd-resolve-test-v6:{}", v6.endpoint().port));
    route.pool.members = {member};
    ProxyUnderTest proxy{{route}};
    EXPECT_EQ(name_through(proxy.endpoint(), Deadline{5s}), '6');
}

} // namespace
} // namespace uringfwd::test
