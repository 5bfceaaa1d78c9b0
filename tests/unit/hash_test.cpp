// The stable hash: the published FNV-1a vectors, fixed values (every engine must compute
// the same ones), and a client address hashed by its IP alone.
#include "routing/hash.hpp"

#include <cstring>
#include <string>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/un.h>

using namespace uringfwd::engine;

namespace {

sockaddr_storage v4(const char* ip, uint16_t port) {
    sockaddr_storage ss{};
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_port = htons(port);
    EXPECT_EQ(inet_pton(AF_INET, ip, &sin.sin_addr), 1) << ip;
    std::memcpy(&ss, &sin, sizeof sin);
    return ss;
}

sockaddr_storage v6(const char* ip, uint16_t port) {
    sockaddr_storage ss{};
    sockaddr_in6 sin6{};
    sin6.sin6_family = AF_INET6;
    sin6.sin6_port = htons(port);
    EXPECT_EQ(inet_pton(AF_INET6, ip, &sin6.sin6_addr), 1) << ip;
    std::memcpy(&ss, &sin6, sizeof sin6);
    return ss;
}

sockaddr_storage unix_path(const char* path) {
    sockaddr_storage ss{};
    sockaddr_un sun{};
    sun.sun_family = AF_UNIX;
    std::strncpy(sun.sun_path, path, sizeof sun.sun_path - 1);
    std::memcpy(&ss, &sun, sizeof sun);
    return ss;
}

} // namespace

TEST(StableHash, Fnv1aMatchesThePublishedVectors) {
    // From the FNV reference test suite (Fowler, Noll, Vo).
    EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ULL);
    EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
    EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ULL);
}

TEST(StableHash, IsUsableAtCompileTime) {
    static_assert(stable_hash("x") == stable_hash("x"));
    static_assert(mix64(0) == 0); // fmix64 maps 0 to itself
    SUCCEED();
}

TEST(StableHash, FixedValuesAcrossBuildsAndMachines) {
    // Pinned (computed by an independent Python transcription of the definition): a
    // change here sends clients to other members than engines built before it do.
    EXPECT_EQ(stable_hash(""), 0x7bd3144f29c0cc9eULL);
    EXPECT_EQ(stable_hash("10.0.0.1:80"), 0xc3a1fda5603af4cfULL);
    EXPECT_EQ(stable_hash("10.0.0.1:80", 1), 0x8da091bdd5ccd7edULL);
}

TEST(StableHash, SeedsGiveDifferentHashes) {
    EXPECT_NE(stable_hash("10.0.0.1:80", 1), stable_hash("10.0.0.1:80", 2));
    EXPECT_NE(stable_hash("10.0.0.1:80", 0), stable_hash("10.0.0.1:80", 1));
}

TEST(StableHash, OneByteChangesAboutHalfTheBits) {
    // The finalizer's purpose: neighbouring inputs land far apart, in low bits too.
    int total = 0;
    for (int i = 0; i < 256; ++i) {
        const std::string a = "10.0.0." + std::to_string(i);
        const std::string b = "10.0.0." + std::to_string(i + 1);
        total += __builtin_popcountll(stable_hash(a) ^ stable_hash(b));
    }
    const double mean = total / 256.0;
    EXPECT_GT(mean, 28.0);
    EXPECT_LT(mean, 36.0);
}

TEST(ClientAddressHash, IgnoresThePort) {
    EXPECT_EQ(hash_client_address(v4("127.1.2.3", 1000)),
              hash_client_address(v4("127.1.2.3", 2000)));
    EXPECT_EQ(hash_client_address(v6("2001:db8::7", 1000)),
              hash_client_address(v6("2001:db8::7", 2000)));
}

TEST(ClientAddressHash, TellsAddressesApart) {
    EXPECT_NE(hash_client_address(v4("127.1.2.3", 1)), hash_client_address(v4("127.1.2.4", 1)));
    EXPECT_NE(hash_client_address(v6("2001:db8::7", 1)), hash_client_address(v6("2001:db8::8", 1)));
}

TEST(ClientAddressHash, IsTheHashOfTheAddressBytes) {
    const unsigned char ip[4] = {127, 1, 2, 3};
    EXPECT_EQ(hash_client_address(v4("127.1.2.3", 9)),
              stable_hash({reinterpret_cast<const char*>(ip), 4}));
}

TEST(ClientAddressHash, AnIpv4MappedAddressIsItsIpv4Address) {
    // A dual-stack listener sees IPv4 clients as ::ffff:a.b.c.d; an IPv4 listener of
    // another engine sees them plain. Both must pick the same member.
    EXPECT_EQ(hash_client_address(v6("::ffff:127.1.2.3", 5)),
              hash_client_address(v4("127.1.2.3", 6)));
    EXPECT_NE(hash_client_address(v6("::127.1.2.3", 5)), hash_client_address(v4("127.1.2.3", 6)));
}

TEST(ClientAddressHash, UnixClientsShareOneConstant) {
    EXPECT_EQ(hash_client_address(unix_path("/run/a.sock")),
              hash_client_address(unix_path("/run/b.sock")));
    EXPECT_EQ(hash_client_address(unix_path("/run/a.sock")), stable_hash(""));
}
