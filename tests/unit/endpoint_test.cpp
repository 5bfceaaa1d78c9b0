// Endpoint::parse / to_string: accepted forms, rejected forms and their messages, and the
// round-trip promise the configuration layer relies on.
#include "uringfwd/endpoint.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace uringfwd {
namespace {

using Kind = Endpoint::Kind;
using ::testing::HasSubstr;

Endpoint make(Kind kind, std::string host, uint16_t port) {
    Endpoint e;
    e.kind = kind;
    e.host = std::move(host);
    e.port = port;
    return e;
}

// The message of the exception parse() throws, or "" when it does not throw.
std::string error_of(std::string_view text) {
    try {
        (void)Endpoint::parse(text);
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    return "";
}

TEST(EndpointParse, Ipv4) {
    EXPECT_EQ(Endpoint::parse("127.0.0.1:9000"), make(Kind::Inet, "127.0.0.1", 9000));
    EXPECT_EQ(Endpoint::parse("0.0.0.0:0"), make(Kind::Inet, "0.0.0.0", 0));
    EXPECT_EQ(Endpoint::parse("255.255.255.255:65535"), make(Kind::Inet, "255.255.255.255", 65535));
}

TEST(EndpointParse, HostName) {
    EXPECT_EQ(Endpoint::parse("localhost:9000"), make(Kind::Inet, "localhost", 9000));
    EXPECT_EQ(Endpoint::parse("db-1.Example.com:5432"), make(Kind::Inet, "db-1.Example.com", 5432));
    // Mixed letters and digits is a name, not a malformed quad.
    EXPECT_EQ(Endpoint::parse("10.0.0.1a:80"), make(Kind::Inet, "10.0.0.1a", 80));
}

TEST(EndpointParse, AnyAddress) {
    EXPECT_EQ(Endpoint::parse(":9000"), make(Kind::Inet, "", 9000));
    EXPECT_EQ(Endpoint::parse(":0"), make(Kind::Inet, "", 0));
}

TEST(EndpointParse, Ipv6) {
    EXPECT_EQ(Endpoint::parse("[::1]:9000"), make(Kind::Inet6, "::1", 9000));
    EXPECT_EQ(Endpoint::parse("[::]:9000"), make(Kind::Inet6, "::", 9000));
    EXPECT_EQ(Endpoint::parse("[2001:db8::42]:443"), make(Kind::Inet6, "2001:db8::42", 443));
    EXPECT_EQ(Endpoint::parse("[::ffff:10.0.0.1]:80"), make(Kind::Inet6, "::ffff:10.0.0.1", 80));
}

TEST(EndpointParse, UnixPath) {
    EXPECT_EQ(Endpoint::parse("unix:/run/app.sock"), make(Kind::Unix, "/run/app.sock", 0));
    EXPECT_EQ(Endpoint::parse("unix:relative.sock"), make(Kind::Unix, "relative.sock", 0));
    EXPECT_TRUE(Endpoint::parse("unix:/x").is_unix());
    EXPECT_FALSE(Endpoint::parse("[::1]:1").is_unix());
}

TEST(EndpointParse, UnixAbstract) {
    EXPECT_EQ(Endpoint::parse("unix:@abstract-name"), make(Kind::Unix, "@abstract-name", 0));
}

TEST(EndpointParse, UnixPathLengthLimit) {
    const std::string longest(107, 'p');
    EXPECT_EQ(Endpoint::parse("unix:" + longest), make(Kind::Unix, longest, 0));
    EXPECT_THAT(error_of("unix:" + longest + "p"), HasSubstr("at most 107"));
    EXPECT_THAT(error_of("unix:@" + longest), HasSubstr("at most 107"));
}

TEST(EndpointParse, PortEdges) {
    EXPECT_EQ(Endpoint::parse("h:65535").port, 65535);
    EXPECT_EQ(Endpoint::parse("h:0").port, 0);
    // Leading zeros are still a plain decimal number.
    EXPECT_EQ(Endpoint::parse("h:0080").port, 80);
}

TEST(EndpointParse, BadPortMessageNamesTextAndRange) {
    EXPECT_EQ(error_of("1.2.3.4:99999"), "bad address \"1.2.3.4:99999\": port must be 0-65535");
    EXPECT_THAT(error_of("h:65536"), HasSubstr("0-65535"));
    EXPECT_THAT(error_of("[::1]:70000"), HasSubstr("0-65535"));
    // Long enough to overflow any fixed-width accumulator.
    EXPECT_THAT(error_of("h:99999999999999999999999999"), HasSubstr("0-65535"));
}

TEST(EndpointParse, PortMustBePlainDecimal) {
    for (const char* text : {"h:+80", "h:-1", "h: 80", "h:80 ", "h:0x50", "h:8o", "h:1e3"}) {
        EXPECT_THAT(error_of(text), HasSubstr("port")) << text;
    }
}

TEST(EndpointParse, MissingPort) {
    EXPECT_THAT(error_of("localhost"), HasSubstr("missing ':port'"));
    EXPECT_THAT(error_of("127.0.0.1"), HasSubstr("missing ':port'"));
    EXPECT_THAT(error_of("localhost:"), HasSubstr("missing port"));
    EXPECT_THAT(error_of(":"), HasSubstr("missing port"));
    EXPECT_THAT(error_of("[::1]"), HasSubstr("':port'"));
    EXPECT_THAT(error_of("[::1]:"), HasSubstr("missing port"));
    EXPECT_THAT(error_of("[::1]9000"), HasSubstr("':port'"));
}

TEST(EndpointParse, UnbracketedIpv6) {
    EXPECT_THAT(error_of("::1:9000"), HasSubstr("brackets"));
    EXPECT_THAT(error_of("2001:db8::1:443"), HasSubstr("brackets"));
}

TEST(EndpointParse, BadIpv6) {
    EXPECT_THAT(error_of("[]:80"), HasSubstr("IPv6"));
    EXPECT_THAT(error_of("[localhost]:80"), HasSubstr("IPv6"));
    EXPECT_THAT(error_of("[1.2.3.4]:80"), HasSubstr("IPv6"));
    EXPECT_THAT(error_of("[::1:80"), HasSubstr("']'"));
    EXPECT_THAT(error_of("[fe80::1%eth0]:80"), HasSubstr("IPv6"));
}

TEST(EndpointParse, BadIpv4) {
    EXPECT_THAT(error_of("256.0.0.1:80"), HasSubstr("IPv4"));
    EXPECT_THAT(error_of("10.1:80"), HasSubstr("IPv4"));
    EXPECT_THAT(error_of("1.2.3.4.5:80"), HasSubstr("IPv4"));
    EXPECT_THAT(error_of("12345:80"), HasSubstr("IPv4"));
    EXPECT_THAT(error_of("...:80"), HasSubstr("IPv4"));
}

TEST(EndpointParse, BadHostCharacters) {
    for (const char* text : {"my_host:80", "a b:80", "host/x:80", "h\xc3\xa9:80", "*:80"}) {
        EXPECT_THAT(error_of(text), HasSubstr("letters, digits")) << text;
    }
}

TEST(EndpointParse, Empty) {
    EXPECT_THAT(error_of(""), HasSubstr("empty"));
    EXPECT_THAT(error_of("unix:"), HasSubstr("expected a socket path"));
    EXPECT_THAT(error_of("unix:@"), HasSubstr("must not be empty"));
}

TEST(EndpointParse, Garbage) {
    for (const char* text : {"garbage", "::", "[", "]", "[[::1]]:80", "tcp://h:80", "h:80:90"}) {
        EXPECT_FALSE(error_of(text).empty()) << text;
    }
}

TEST(EndpointParse, UnixPathWithNulRejected) {
    using namespace std::string_literals;
    EXPECT_THAT(error_of("unix:/a\0b"s), HasSubstr("NUL"));
}

TEST(EndpointParse, MessagesStayOnOneLine) {
    using namespace std::string_literals;
    const std::string message = error_of("bad\nhost\0:1\""s);
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_THAT(message, HasSubstr("bad\\x0ahost\\x00:1\\\""));
    EXPECT_THAT(message, HasSubstr("bad address \""));
}

TEST(EndpointParse, LongInputIsTruncatedInMessage) {
    const std::string message = error_of(std::string(5000, 'x'));
    EXPECT_LT(message.size(), 300u);
    EXPECT_THAT(message, HasSubstr("...\""));
}

TEST(EndpointToString, Forms) {
    EXPECT_EQ(make(Kind::Inet, "127.0.0.1", 9000).to_string(), "127.0.0.1:9000");
    EXPECT_EQ(make(Kind::Inet, "", 9000).to_string(), ":9000");
    EXPECT_EQ(make(Kind::Inet6, "::1", 443).to_string(), "[::1]:443");
    EXPECT_EQ(make(Kind::Unix, "/run/app.sock", 0).to_string(), "unix:/run/app.sock");
    EXPECT_EQ(make(Kind::Unix, "@name", 0).to_string(), "unix:@name");
}

class EndpointRoundTrip : public ::testing::TestWithParam<const char*> {};

TEST_P(EndpointRoundTrip, ParseOfToStringIsIdentity) {
    const Endpoint e = Endpoint::parse(GetParam());
    EXPECT_EQ(Endpoint::parse(e.to_string()), e);
}

INSTANTIATE_TEST_SUITE_P(AllForms, EndpointRoundTrip,
                         ::testing::Values("127.0.0.1:9000", "localhost:1", ":9000", ":0",
                                           "[::1]:9000", "[::]:0", "[2001:db8::42]:65535",
                                           "unix:/run/app.sock", "unix:@abstract", "h:007",
                                           "unix:/a:b:80"),
                         [](const auto& info) { return std::to_string(info.index); });

} // namespace
} // namespace uringfwd
