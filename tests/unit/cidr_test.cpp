#include "net/cidr.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <gtest/gtest.h>

namespace uringfwd::engine {
namespace {

sockaddr_storage addr(const char* text) {
    sockaddr_storage s{};
    if (inet_pton(AF_INET, text, &reinterpret_cast<sockaddr_in*>(&s)->sin_addr) == 1)
        s.ss_family = AF_INET;
    else if (inet_pton(AF_INET6, text, &reinterpret_cast<sockaddr_in6*>(&s)->sin6_addr) == 1)
        s.ss_family = AF_INET6;
    return s;
}

Cidr cidr(const char* text) {
    std::string error;
    auto c = Cidr::parse(text, error);
    EXPECT_TRUE(c.has_value()) << text << ": " << error;
    return c.value_or(Cidr{});
}

TEST(Cidr, MatchesByPrefix) {
    EXPECT_TRUE(cidr("10.0.0.0/8").contains(addr("10.200.3.4")));
    EXPECT_FALSE(cidr("10.0.0.0/8").contains(addr("11.0.0.1")));
    EXPECT_TRUE(cidr("192.168.4.0/22").contains(addr("192.168.7.255")));
    EXPECT_FALSE(cidr("192.168.4.0/22").contains(addr("192.168.8.0")));
    EXPECT_TRUE(cidr("127.0.0.1").contains(addr("127.0.0.1")));
    EXPECT_FALSE(cidr("127.0.0.1").contains(addr("127.0.0.2")));
    EXPECT_TRUE(cidr("0.0.0.0/0").contains(addr("8.8.8.8")));
    EXPECT_TRUE(cidr("::1/128").contains(addr("::1")));
    EXPECT_TRUE(cidr("2001:db8::/32").contains(addr("2001:db8:ffff::1")));
    EXPECT_FALSE(cidr("2001:db8::/32").contains(addr("2001:db9::1")));
    EXPECT_FALSE(cidr("::1/128").contains(addr("127.0.0.1")));
}

TEST(Cidr, Ipv4MappedPeersMatchIpv4Ranges) {
    EXPECT_TRUE(cidr("127.0.0.0/8").contains(addr("::ffff:127.0.0.1")));
    EXPECT_FALSE(cidr("10.0.0.0/8").contains(addr("::ffff:127.0.0.1")));
}

TEST(Cidr, UnixPeersMatchNothing) {
    sockaddr_storage unix_peer{};
    unix_peer.ss_family = AF_UNIX;
    EXPECT_FALSE(cidr("0.0.0.0/0").contains(unix_peer));
}

TEST(Cidr, RejectsBadText) {
    for (const char* bad : {"", "10.0.0.0/", "10.0.0.0/33", "::/129", "10.0.0.1/8", "10.0.0/8",
                            "host.example/8", "10.0.0.0/x", "10.0.0.0/-1"}) {
        std::string error;
        EXPECT_FALSE(Cidr::parse(bad, error).has_value()) << bad;
        EXPECT_FALSE(error.empty()) << bad;
    }
}

} // namespace
} // namespace uringfwd::engine
