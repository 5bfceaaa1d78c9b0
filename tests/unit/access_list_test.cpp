// AccessList: deny wins, an allow list denies everything it does not name, IPv4-mapped
// IPv6 clients are judged by their IPv4 address, bad entries are named.
#include "routing/access_list.hpp"
#include "tests/unit/address_text.hpp"

#include <sys/un.h>

#include <gtest/gtest.h>

namespace uringfwd::engine {
namespace {

AccessList list(std::vector<std::string> allow, std::vector<std::string> deny) {
    std::string error;
    std::optional<AccessList> out = AccessList::parse(allow, deny, error);
    EXPECT_TRUE(out.has_value()) << error;
    return out.value_or(AccessList{});
}

TEST(AccessList, EmptyAdmitsEveryone) {
    AccessList none = list({}, {});
    EXPECT_TRUE(none.empty());
    EXPECT_TRUE(none.admits(address_of("127.0.0.2")));
    EXPECT_TRUE(none.admits(address_of("::1")));
}

TEST(AccessList, DenyRefusesOnlyWhatItNames) {
    AccessList deny = list({}, {"127.0.0.2"});
    EXPECT_FALSE(deny.empty());
    EXPECT_FALSE(deny.admits(address_of("127.0.0.2")));
    EXPECT_TRUE(deny.admits(address_of("127.0.0.3")));
    EXPECT_TRUE(deny.admits(address_of("::1")));
}

TEST(AccessList, AllowDeniesEverythingElse) {
    AccessList allow = list({"10.0.0.0/8", "::1/128"}, {});
    EXPECT_TRUE(allow.admits(address_of("10.1.2.3")));
    EXPECT_TRUE(allow.admits(address_of("::1")));
    EXPECT_FALSE(allow.admits(address_of("11.0.0.1")));
    EXPECT_FALSE(allow.admits(address_of("::2")));
}

TEST(AccessList, DenyWinsOverAllow) {
    AccessList both = list({"127.0.0.0/8"}, {"127.0.0.2/32"});
    EXPECT_FALSE(both.admits(address_of("127.0.0.2")));
    EXPECT_TRUE(both.admits(address_of("127.0.0.3")));
    // Written the other way round, the same outcome.
    AccessList wide_deny = list({"127.0.0.2"}, {"127.0.0.0/8"});
    EXPECT_FALSE(wide_deny.admits(address_of("127.0.0.2")));
}

TEST(AccessList, MappedIpv6MatchesIpv4Entries) {
    EXPECT_FALSE(list({}, {"127.0.0.2"}).admits(address_of("::ffff:127.0.0.2")));
    EXPECT_TRUE(list({"10.0.0.0/8"}, {}).admits(address_of("::ffff:10.9.9.9")));
    EXPECT_FALSE(list({"10.0.0.0/8"}, {}).admits(address_of("::ffff:11.9.9.9")));
}

TEST(AccessList, UnixPeerMatchesNoRange) {
    sockaddr_storage unix_peer{};
    unix_peer.ss_family = AF_UNIX;
    EXPECT_TRUE(list({}, {"0.0.0.0/0", "::/0"}).admits(unix_peer));
    EXPECT_FALSE(list({"0.0.0.0/0"}, {}).admits(unix_peer));
}

TEST(AccessList, BadEntryIsNamed) {
    std::string error;
    EXPECT_FALSE(AccessList::parse({"10.0.0.0/8"}, {"10.0.0.1/8"}, error).has_value());
    EXPECT_EQ(error.rfind("deny: 10.0.0.1/8: ", 0), 0u) << error;
    EXPECT_FALSE(AccessList::parse({"nope"}, {}, error).has_value());
    EXPECT_EQ(error, "allow: nope: not an IPv4 or IPv6 address");
}

} // namespace
} // namespace uringfwd::engine
