// Socket controls as pure logic: the options a route's settings turn into, per family;
// what validate() refuses; and the configuration file's keys, each mistake at its line.
#include "net/socket_controls.hpp"
#include "uringfwd/config.hpp"
#include "uringfwd/config_file.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <string>
#include <vector>

namespace uringfwd {
namespace {

using engine::SocketOption;
using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

RouteConfig route_with_member() {
    RouteConfig route;
    route.name = "web";
    route.listen = {Endpoint::parse("127.0.0.1:8080")};
    route.pool.members = {{Endpoint::parse("127.0.0.1:9001")}};
    return route;
}

TEST(SocketControls, NothingAskedSetsNothing) {
    const RouteConfig route = route_with_member();
    EXPECT_THAT(engine::socket_options(engine::client_controls(route), AF_INET), IsEmpty());
    EXPECT_THAT(engine::socket_options(engine::upstream_controls(route), AF_INET6), IsEmpty());
}

TEST(SocketControls, KeepaliveAndUserTimeoutInTheOrderTheyAreSet) {
    RouteConfig route = route_with_member();
    route.client_keepalive = TcpKeepalive{60s, 10s, 6u};
    route.client_user_timeout = 30s;
    EXPECT_THAT(engine::socket_options(engine::client_controls(route), AF_INET),
                ElementsAre(SocketOption{SOL_SOCKET, SO_KEEPALIVE, 1, {}},
                            SocketOption{IPPROTO_TCP, TCP_KEEPIDLE, 60, {}},
                            SocketOption{IPPROTO_TCP, TCP_KEEPINTVL, 10, {}},
                            SocketOption{IPPROTO_TCP, TCP_KEEPCNT, 6, {}},
                            SocketOption{IPPROTO_TCP, TCP_USER_TIMEOUT, 30000, {}}));
    // The client side never gets the upstream's settings, nor they the client's.
    EXPECT_THAT(engine::socket_options(engine::upstream_controls(route), AF_INET), IsEmpty());
}

TEST(SocketControls, KeepaliveFieldsLeftOutKeepTheKernelsDefaults) {
    RouteConfig route = route_with_member();
    route.upstream_keepalive = TcpKeepalive{std::nullopt, 5s, std::nullopt};
    EXPECT_THAT(engine::socket_options(engine::upstream_controls(route), AF_INET6),
                ElementsAre(SocketOption{SOL_SOCKET, SO_KEEPALIVE, 1, {}},
                            SocketOption{IPPROTO_TCP, TCP_KEEPINTVL, 5, {}}));
}

TEST(SocketControls, TosIsIpTosForIpv4AndTrafficClassForIpv6) {
    RouteConfig route = route_with_member();
    route.mark = 0xfffffffeu;
    route.tos = 0xb8; // DSCP EF
    const engine::FamilyOptions options = engine::family_options(engine::upstream_controls(route));
    EXPECT_THAT(options.of(AF_INET),
                ElementsAre(SocketOption{SOL_SOCKET, SO_MARK, static_cast<int>(0xfffffffeu), {}},
                            SocketOption{IPPROTO_IP, IP_TOS, 0xb8, {}}));
    EXPECT_THAT(options.of(AF_INET6),
                ElementsAre(SocketOption{SOL_SOCKET, SO_MARK, static_cast<int>(0xfffffffeu), {}},
                            SocketOption{IPPROTO_IPV6, IPV6_TCLASS, 0xb8, {}}));
    EXPECT_THAT(options.of(AF_UNIX), IsEmpty()); // a Unix upstream takes none of them
}

TEST(SocketControls, SourceAddressesAreLiteralsWithoutPorts) {
    std::string error;
    const auto v4 = engine::parse_source_address("127.0.0.5", error);
    ASSERT_TRUE(v4.has_value());
    EXPECT_EQ(v4->family(), AF_INET);
    EXPECT_EQ(reinterpret_cast<const sockaddr_in*>(&v4->storage)->sin_port, 0);
    const auto v6 = engine::parse_source_address("2001:db8::7", error);
    ASSERT_TRUE(v6.has_value());
    EXPECT_EQ(v6->family(), AF_INET6);
    EXPECT_EQ(source_address_problem("127.0.0.5:4000"),
              "not an IP address (a source takes no port: the kernel picks it)");
    EXPECT_EQ(source_address_problem("localhost"), "not an IPv4 or IPv6 address");
    EXPECT_EQ(source_address_problem("10.0.0.0/8"), "not an IPv4 or IPv6 address");
    EXPECT_EQ(source_address_problem("::1"), "");
}

TEST(SocketControls, SourcesTakeTurnsWithinTheUpstreamsFamily) {
    std::string error;
    std::vector<engine::SocketAddress> sources;
    for (const char* text : {"127.0.0.5", "::1", "127.0.0.6"})
        sources.push_back(*engine::parse_source_address(text, error));
    std::vector<const engine::SocketAddress*> v4;
    for (uint64_t turn = 0; turn < 4; ++turn)
        v4.push_back(engine::pick_source(sources, AF_INET, turn));
    EXPECT_THAT(v4, ElementsAre(&sources[0], &sources[2], &sources[0], &sources[2]));
    EXPECT_EQ(engine::pick_source(sources, AF_INET6, 7), &sources[1]);
    sources.erase(sources.begin() + 1);
    EXPECT_EQ(engine::pick_source(sources, AF_INET6, 0), nullptr);
}

TEST(SocketControls, ValidateRefusesWhatTheKernelWouldRefuse) {
    EngineConfig config;
    RouteConfig route = route_with_member();
    route.client_keepalive = TcpKeepalive{0s, 32768s, 128u};
    route.upstream_user_timeout = -1ms;
    route.tos = 256;
    route.source = {"127.0.0.1:80"};
    route.pool.members.push_back({Endpoint::parse("unix:/run/a.sock")});
    route.pool.members.back().source = {"127.0.0.5"};
    config.routes = {route};
    EXPECT_THAT(
        validate(config),
        ElementsAre(
            "route \"web\": client_keepalive idle must be 1..32767 s (the kernel's range), not 0 s",
            "route \"web\": client_keepalive interval must be 1..32767 s (the kernel's range), "
            "not 32768 s",
            "route \"web\": client_keepalive count must be 1..127 (the kernel's range), not 128",
            "route \"web\": upstream_user_timeout must be 0..2147483647 ms, not -1 ms",
            "route \"web\": tos must be 0..255, not 256",
            "route \"web\": source \"127.0.0.1:80\": not an IP address (a source takes no port: "
            "the kernel picks it)",
            "route \"web\": upstream unix:/run/a.sock: source is for TCP upstreams, not a Unix "
            "socket"));
}

TEST(SocketControls, TransparentAndASourceExcludeEachOther) {
    EngineConfig config;
    RouteConfig route = route_with_member();
    route.transparent = true;
    config.routes = {route};
    EXPECT_THAT(validate(config), IsEmpty());
    config.routes[0].pool.members[0].source = {"127.0.0.5"};
    EXPECT_THAT(validate(config),
                ElementsAre("route \"web\": transparent and source exclude each other: a "
                            "transparent connection's source is the client's address"));
}

TEST(SocketControls, ValidateTakesTheKernelsLimits) {
    EngineConfig config;
    RouteConfig route = route_with_member();
    route.client_keepalive = TcpKeepalive{1s, 32767s, 127u};
    route.upstream_keepalive = TcpKeepalive{32767s, 1s, 1u};
    route.client_user_timeout = engine::kMaxUserTimeout;
    route.tos = 255;
    route.mark = 0xffffffffu;
    route.source = {"127.0.0.5", "::1"};
    config.routes = {route};
    EXPECT_THAT(validate(config), IsEmpty());
}

ConfigFileResult parse(const std::string& text) {
    return parse_config(text, "t.toml", [] { return NumaTopology{}; });
}

// A route whose keys start at line 4; its member's at line 6 plus the route's keys.
std::string web(const std::string& route_keys, const std::string& upstream_keys = "") {
    return "[[route]]\nname = \"web\"\nlisten = \"127.0.0.1:8080\"\n" + route_keys +
           "  [[route.upstream]]\n  address = \"127.0.0.1:9001\"\n" + upstream_keys;
}

TEST(SocketControlsFile, EveryKeyMapsOntoItsField) {
    const ConfigFileResult r = parse(web("client_keepalive = { idle = \"60s\", interval = \"10s\","
                                         " count = 6 }\n"
                                         "upstream_keepalive = { idle = \"2m\" }\n"
                                         "client_user_timeout = \"30s\"\n"
                                         "upstream_user_timeout = \"1500ms\"\n"
                                         "mark = 4294967295\n"
                                         "tos = 184\n"
                                         "source = [\"127.0.0.5\", \"::1\"]\n"
                                         "mptcp = true\n"
                                         "fastopen = true\n",
                                         "  source = \"127.0.0.7\"\n"
                                         "  mptcp = true\n"
                                         "  fastopen = true\n"));
    ASSERT_TRUE(r.config.has_value()) << ::testing::PrintToString(r.errors);
    const RouteConfig& route = r.config->routes.at(0);
    EXPECT_EQ(route.client_keepalive, (TcpKeepalive{60s, 10s, 6u}));
    EXPECT_EQ(route.upstream_keepalive, (TcpKeepalive{120s, std::nullopt, std::nullopt}));
    EXPECT_EQ(route.client_user_timeout, 30s);
    EXPECT_EQ(route.upstream_user_timeout, 1500ms);
    EXPECT_EQ(route.mark, 4294967295u);
    EXPECT_EQ(route.tos, 184u);
    EXPECT_THAT(route.source, ElementsAre("127.0.0.5", "::1"));
    EXPECT_THAT(route.pool.members.at(0).source, ElementsAre("127.0.0.7"));
    EXPECT_TRUE(route.mptcp);
    EXPECT_TRUE(route.pool.members.at(0).mptcp);
    EXPECT_TRUE(route.fastopen);
    EXPECT_TRUE(route.pool.members.at(0).fastopen);
    EXPECT_THAT(validate(*r.config), IsEmpty());
}

TEST(SocketControlsFile, TransparentIsRead) {
    const ConfigFileResult r = parse(web("transparent = true\n"));
    ASSERT_TRUE(r.config.has_value()) << ::testing::PrintToString(r.errors);
    EXPECT_TRUE(r.config->routes.at(0).transparent);
}

struct BadCase {
    const char* name;
    std::string text;
    std::vector<std::string> errors;
};

class SocketControlsFileError : public ::testing::TestWithParam<BadCase> {};

TEST_P(SocketControlsFileError, ReportsExactly) {
    const ConfigFileResult result = parse(GetParam().text);
    EXPECT_FALSE(result.config.has_value());
    EXPECT_EQ(result.errors, GetParam().errors) << "file:\n" << GetParam().text;
}

const BadCase kBadCases[] = {
    {"KeepaliveNotATable",
     web("client_keepalive = \"60s\"\n"),
     {"t.toml:4: route \"web\": client_keepalive must be a table, not \"60s\""}},
    {"KeepaliveIdleZero",
     web("client_keepalive = { idle = \"0s\" }\n"),
     {"t.toml:4: route \"web\": client_keepalive idle must be 1s..32767s, not \"0s\""}},
    {"KeepaliveIdleTooLong",
     web("upstream_keepalive = { idle = \"10h\" }\n"),
     {"t.toml:4: route \"web\": upstream_keepalive idle must be 1s..32767s, not \"10h\""}},
    {"KeepaliveIntervalNotWholeSeconds",
     web("client_keepalive = { interval = \"1500ms\" }\n"),
     {"t.toml:4: route \"web\": client_keepalive interval must be whole seconds (the kernel "
      "counts it in seconds), not 1500ms"}},
    {"KeepaliveCountTooMany",
     web("client_keepalive = { count = 128 }\n"),
     {"t.toml:4: route \"web\": client_keepalive count must be 1..127, not 128"}},
    {"KeepaliveCountNegative",
     web("upstream_keepalive = { count = -1 }\n"),
     {"t.toml:4: route \"web\": upstream_keepalive count must be 1..127, not -1"}},
    {"KeepaliveUnknownKey",
     web("client_keepalive = { idel = \"5s\" }\n"),
     {"t.toml:4: route \"web\": unknown key 'idel' in client_keepalive (idle, interval, "
      "count)"}},
    {"UserTimeoutBadDuration",
     web("client_user_timeout = \"soon\"\n"),
     {"t.toml:4: route \"web\": client_user_timeout must be a duration such as \"2s\", not "
      "\"soon\": must start with a whole number"}},
    {"UserTimeoutTooLong",
     web("upstream_user_timeout = \"600h\"\n"),
     {"t.toml:4: route \"web\": upstream_user_timeout must be 0..2147483647ms, not \"600h\""}},
    {"MarkNegative",
     web("mark = -1\n"),
     {"t.toml:4: route \"web\": mark must be 0..4294967295, not -1"}},
    {"MarkTooLarge",
     web("mark = 4294967296\n"),
     {"t.toml:4: route \"web\": mark must be 0..4294967295, not 4294967296"}},
    {"TosTooLarge", web("tos = 256\n"), {"t.toml:4: route \"web\": tos must be 0..255, not 256"}},
    {"TosAString",
     web("tos = \"ef\"\n"),
     {"t.toml:4: route \"web\": tos must be an integer (0..255), not \"ef\""}},
    {"SourceNotAnAddress",
     web("source = \"localhost\"\n"),
     {"t.toml:4: route \"web\": source \"localhost\": not an IPv4 or IPv6 address"}},
    {"SourceWithAPort",
     web("source = [\"127.0.0.5\", \"127.0.0.6:80\"]\n"),
     {"t.toml:4: route \"web\": source \"127.0.0.6:80\": not an IP address (a source takes no "
      "port: the kernel picks it)"}},
    {"SourceEmptyArray",
     web("source = []\n"),
     {"t.toml:4: route \"web\": source must be an IP address or a non-empty array of them, "
      "such as \"192.0.2.10\", not an array"}},
    {"SourceANumber",
     web("source = 5\n"),
     {"t.toml:4: route \"web\": source must be an IP address or a non-empty array of them, "
      "such as \"192.0.2.10\", not 5"}},
    {"MemberSourceBad",
     web("", "  source = \"::1:80:x\"\n"),
     {"t.toml:6: route \"web\": upstream source \"::1:80:x\": not an IPv4 or IPv6 address"}},
    {"MemberSourceOnAUnixSocket",
     "[[route]]\nname = \"web\"\nlisten = \"127.0.0.1:8080\"\n"
     "  [[route.upstream]]\n  address = \"unix:/run/a.sock\"\n  source = \"127.0.0.5\"\n",
     {"t.toml:6: route \"web\": upstream source is for TCP upstreams, not a Unix socket"}},
    {"MptcpNotABoolean",
     web("mptcp = \"yes\"\n"),
     {"t.toml:4: route \"web\": mptcp must be true or false, not \"yes\""}},
    {"MemberMptcpOnAUnixSocket",
     "[[route]]\nname = \"web\"\nlisten = \"127.0.0.1:8080\"\n"
     "  [[route.upstream]]\n  address = \"unix:/run/a.sock\"\n  mptcp = true\n",
     {"t.toml:6: route \"web\": upstream mptcp is for TCP upstreams, not a Unix socket"}},
    {"TransparentNotABoolean",
     web("transparent = \"yes\"\n"),
     {"t.toml:4: route \"web\": transparent must be true or false, not \"yes\""}},
    {"FastopenNotABoolean",
     web("", "  fastopen = 1\n"),
     {"t.toml:6: route \"web\": upstream fastopen must be true or false, not 1"}},
    {"MemberFastopenOnAUnixSocket",
     "[[route]]\nname = \"web\"\nlisten = \"127.0.0.1:8080\"\n"
     "  [[route.upstream]]\n  address = \"unix:/run/a.sock\"\n  fastopen = true\n",
     {"t.toml:6: route \"web\": upstream fastopen is for TCP upstreams, not a Unix socket"}},
};

INSTANTIATE_TEST_SUITE_P(Cases, SocketControlsFileError, ::testing::ValuesIn(kBadCases),
                         [](const auto& info) { return info.param.name; });

} // namespace
} // namespace uringfwd
