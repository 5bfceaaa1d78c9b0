#include "net/cidr.hpp"
#include "tests/unit/address_text.hpp"

#include <gtest/gtest.h>

namespace uringfwd::engine {
namespace {

Cidr cidr(const char* text) {
    std::string error;
    auto c = Cidr::parse(text, error);
    EXPECT_TRUE(c.has_value()) << text << ": " << error;
    return c.value_or(Cidr{});
}

TEST(Cidr, MatchesByPrefix) {
    EXPECT_TRUE(cidr("10.0.0.0/8").contains(address_of("10.200.3.4")));
    EXPECT_FALSE(cidr("10.0.0.0/8").contains(address_of("11.0.0.1")));
    EXPECT_TRUE(cidr("192.168.4.0/22").contains(address_of("192.168.7.255")));
    EXPECT_FALSE(cidr("192.168.4.0/22").contains(address_of("192.168.8.0")));
    EXPECT_TRUE(cidr("127.0.0.1").contains(address_of("127.0.0.1")));
    EXPECT_FALSE(cidr("127.0.0.1").contains(address_of("127.0.0.2")));
    EXPECT_TRUE(cidr("0.0.0.0/0").contains(address_of("8.8.8.8")));
    EXPECT_TRUE(cidr("::1/128").contains(address_of("::1")));
    EXPECT_TRUE(cidr("2001:db8::/32").contains(address_of("2001:db8:ffff::1")));
    EXPECT_FALSE(cidr("2001:db8::/32").contains(address_of("2001:db9::1")));
    EXPECT_FALSE(cidr("::1/128").contains(address_of("127.0.0.1")));
}

TEST(Cidr, Ipv4MappedPeersMatchIpv4Ranges) {
    EXPECT_TRUE(cidr("127.0.0.0/8").contains(address_of("::ffff:127.0.0.1")));
    EXPECT_FALSE(cidr("10.0.0.0/8").contains(address_of("::ffff:127.0.0.1")));
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
