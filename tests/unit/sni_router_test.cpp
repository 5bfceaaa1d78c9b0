// Choosing a route of a shared listen address by server name and ALPN, and the
// configurations that are refused as ambiguous.
#include "routing/sni_router.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace uringfwd::engine {
namespace {

using ::testing::HasSubstr;

SniRule rule(std::size_t route, std::vector<std::string> names,
             std::vector<std::string> alpn = {}) {
    // Appended, not "r" + std::to_string(route): GCC 12 at -O3 warns about that insert
    // at position 0 (-Wrestrict false positive, GCC bug 105329), fatal under -Werror.
    return {route, std::string("r").append(std::to_string(route)), std::move(names),
            std::move(alpn)};
}

struct Hello {
    Hello(std::string n, std::vector<std::string> a = {})
        : name(std::move(n)), alpn(std::move(a)) {}
    std::string name;
    std::vector<std::string> alpn;
    tls::ClientHelloInfo info() const {
        tls::ClientHelloInfo out;
        out.server_name = name;
        for (const std::string& p : alpn)
            out.alpn[out.alpn_count++] = p;
        return out;
    }
};

std::optional<std::size_t> choose(const SniRouter& router, const Hello& hello) {
    tls::ClientHelloInfo info = hello.info();
    return router.choose(&info);
}

TEST(SniRouter, ExactWildcardAndDefault) {
    SniRouter router({rule(0, {}), rule(1, {"a.example"}), rule(2, {"*.b.example"}),
                      rule(3, {"*.x.b.example", "Mixed.Example"})});
    EXPECT_TRUE(router.problems().empty());
    EXPECT_TRUE(router.needs_client_hello());
    EXPECT_EQ(choose(router, {"a.example"}), 1u);
    EXPECT_EQ(choose(router, {"A.EXAMPLE"}), 1u); // case-insensitive
    EXPECT_EQ(choose(router, {"mixed.example"}), 3u);
    EXPECT_EQ(choose(router, {"www.b.example"}), 2u);
    EXPECT_EQ(choose(router, {"deep.www.b.example"}), 2u);
    EXPECT_EQ(choose(router, {"y.x.b.example"}), 3u); // the longer suffix wins
    EXPECT_EQ(choose(router, {"b.example"}), 0u);     // a wildcard needs a label before it
    EXPECT_EQ(choose(router, {"a.example.evil"}), 0u);
    EXPECT_EQ(choose(router, {"xa.example"}), 0u);
    EXPECT_EQ(choose(router, {""}), 0u);   // no SNI
    EXPECT_EQ(router.choose(nullptr), 0u); // not TLS
}

TEST(SniRouter, AlpnBreaksTiesWithinALevel) {
    SniRouter router({rule(0, {}), rule(1, {"a.example"}, {"h2"}), rule(2, {"a.example"}),
                      rule(3, {"a.example"}, {"http/1.1"}), rule(4, {}, {"acme-tls/1"})});
    EXPECT_TRUE(router.problems().empty()) << router.problems().front();
    EXPECT_EQ(choose(router, {"a.example", {"h2", "http/1.1"}}), 1u);
    EXPECT_EQ(choose(router, {"a.example", {"http/1.1", "h2"}}), 3u); // client's order
    EXPECT_EQ(choose(router, {"a.example", {"spdy/3"}}), 2u);
    EXPECT_EQ(choose(router, {"a.example"}), 2u);
    EXPECT_EQ(choose(router, {"other.example", {"acme-tls/1"}}), 4u);
    EXPECT_EQ(choose(router, {"", {"acme-tls/1"}}), 4u);
    EXPECT_EQ(choose(router, {"other.example", {"h2"}}), 0u);
}

TEST(SniRouter, NoDefaultMeansNoRoute) {
    SniRouter router({rule(5, {"a.example"})});
    EXPECT_TRUE(router.needs_client_hello());
    EXPECT_EQ(choose(router, {"a.example"}), 5u);
    EXPECT_EQ(choose(router, {"b.example"}), std::nullopt);
    EXPECT_EQ(router.choose(nullptr), std::nullopt);
}

TEST(SniRouter, APlainRouteReadsNothing) {
    SniRouter router({rule(0, {})});
    EXPECT_FALSE(router.needs_client_hello());
    EXPECT_EQ(router.choose(nullptr), 0u);
}

TEST(SniRouter, AmbiguousGroupsAreProblems) {
    struct Case {
        std::vector<SniRule> rules;
        const char* expected;
    };
    const std::vector<Case> cases = {
        {{rule(0, {}), rule(1, {})}, "only one may be the default"},
        {{rule(0, {"a.example"}), rule(1, {"A.example"})}, "a client could go to either"},
        {{rule(0, {"*.a.example"}), rule(1, {"*.a.example"})}, "\"*.a.example\" is in routes"},
        {{rule(0, {"a.example"}, {"h2", "x"}), rule(1, {"a.example"}, {"h2"})}, "with alpn \"h2\""},
        {{rule(0, {}, {"h2"}), rule(1, {}, {"h2"})}, "any name"},
        {{rule(0, {"a.example", "a.example"})}, "listed twice"},
        {{rule(0, {"a..example"})}, "empty label"},
        {{rule(0, {"a.*.example"})}, "'*.' only at the front"},
        {{rule(0, {"*"})}, "'*.' only at the front"},
        {{rule(0, {"*."})}, "host name of 1..253"},
        {{rule(0, {"a.example."})}, "empty label"},
        {{rule(0, {"a.example"}, {""})}, "alpn \"\" must be 1..255"},
    };
    for (const Case& c : cases) {
        SniRouter router(c.rules);
        ASSERT_FALSE(router.problems().empty()) << c.expected;
        EXPECT_THAT(router.problems().front(), HasSubstr(c.expected));
    }
    // Disjoint ALPN lists on one name are fine.
    EXPECT_TRUE(SniRouter({rule(0, {"a.example"}, {"h2"}), rule(1, {"a.example"}, {"x"})})
                    .problems()
                    .empty());
}

} // namespace
} // namespace uringfwd::engine
