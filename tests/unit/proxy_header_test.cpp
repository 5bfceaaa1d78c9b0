// The PROXY protocol codec (engine/protocol/proxy_header.hpp) against the examples and
// rules of HAProxy's doc/proxy-protocol.txt (sections 2.1 and 2.2).
#include "protocol/proxy_header.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace uringfwd::engine::proxy {
namespace {

std::span<const std::byte> bytes_of(const std::string& s) {
    return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

std::string text_of(const std::vector<std::byte>& v) {
    return {reinterpret_cast<const char*>(v.data()), v.size()};
}

SocketAddress v4(const char* host, uint16_t port) {
    SocketAddress a;
    auto* in = reinterpret_cast<sockaddr_in*>(&a.storage);
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
    inet_pton(AF_INET, host, &in->sin_addr);
    a.length = sizeof(sockaddr_in);
    return a;
}

SocketAddress v6(const char* host, uint16_t port) {
    SocketAddress a;
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    inet_pton(AF_INET6, host, &in6->sin6_addr);
    a.length = sizeof(sockaddr_in6);
    return a;
}

std::string host_of(const SocketAddress& a) {
    char text[INET6_ADDRSTRLEN] = {};
    if (a.family() == AF_INET)
        inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&a.storage)->sin_addr, text,
                  sizeof(text));
    else
        inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&a.storage)->sin6_addr, text,
                  sizeof(text));
    return text;
}

uint16_t port_of(const SocketAddress& a) {
    return a.family() == AF_INET
               ? ntohs(reinterpret_cast<const sockaddr_in*>(&a.storage)->sin_port)
               : ntohs(reinterpret_cast<const sockaddr_in6*>(&a.storage)->sin6_port);
}

TEST(ProxyHeaderV1, ParsesTcp4AndLeavesTheStream) {
    std::string in = "PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\nGET / HTTP/1.1\r\n";
    ParseResult r = parse(bytes_of(in));
    ASSERT_EQ(r.status, Status::Done);
    EXPECT_EQ(r.consumed, in.find("GET"));
    EXPECT_EQ(r.header.version, Version::V1);
    EXPECT_FALSE(r.header.unknown);
    EXPECT_EQ(host_of(r.header.source), "192.168.0.1");
    EXPECT_EQ(port_of(r.header.source), 56324);
    EXPECT_EQ(host_of(r.header.destination), "192.168.0.11");
    EXPECT_EQ(port_of(r.header.destination), 443);
}

TEST(ProxyHeaderV1, ParsesTcp6AndUnknown) {
    ParseResult r = parse(bytes_of("PROXY TCP6 2001:db8::1 ::1 1 65535\r\n"));
    ASSERT_EQ(r.status, Status::Done);
    EXPECT_EQ(host_of(r.header.source), "2001:db8::1");
    EXPECT_EQ(port_of(r.header.destination), 65535);
    // UNKNOWN: the rest of the line is ignored and the real endpoints are kept.
    ParseResult u = parse(bytes_of("PROXY UNKNOWN whatever follows\r\nX"));
    ASSERT_EQ(u.status, Status::Done);
    EXPECT_TRUE(u.header.unknown);
    EXPECT_EQ(u.consumed, 32u);
}

TEST(ProxyHeaderV1, EveryPrefixNeedsMore) {
    std::string in = "PROXY TCP4 10.1.2.3 10.0.0.1 1000 80\r\n";
    for (std::size_t n = 0; n < in.size(); ++n)
        EXPECT_EQ(parse(bytes_of(in.substr(0, n))).status, Status::NeedMore) << n;
    EXPECT_EQ(parse(bytes_of(in)).status, Status::Done);
}

TEST(ProxyHeaderV1, RejectsBadLines) {
    struct Case {
        const char* input;
        Status status;
    } cases[] = {
        {"GET / HTTP/1.1\r\n", Status::Malformed},
        {"PROXY TCP5 1.2.3.4 1.2.3.5 1 2\r\n", Status::Malformed},
        {"PROXY TCP4 1.2.3.4 1.2.3.5 1 2 \r\n", Status::Malformed},    // trailing space
        {"PROXY TCP4  1.2.3.4 1.2.3.5 1 2\r\n", Status::Malformed},    // two spaces
        {"PROXY TCP4 1.2.3.4 1.2.3.5 1 65536\r\n", Status::Malformed}, // port range
        {"PROXY TCP4 1.2.3.4 1.2.3.5 -1 2\r\n", Status::Malformed},
        {"PROXY TCP4 ::1 ::1 1 2\r\n", Status::Malformed}, // family mismatch
        {"PROXY TCP6 1.2.3.4 1.2.3.5 1 2\r\n", Status::Malformed},
        {"PROXY TCP4 1.2.3.4 1.2.3.5 1 2\n", Status::Malformed}, // LF alone
        {"PROXY TCP4 1.2.3.4 1.2.3.5 1 2\rX", Status::Malformed},
        {"PROXY TCP4 1.2.3.4\r\n", Status::Malformed},
    };
    for (const Case& c : cases) {
        ParseResult r = parse(bytes_of(c.input));
        EXPECT_EQ(r.status, c.status) << c.input;
        EXPECT_FALSE(r.error.empty()) << c.input;
    }
}

TEST(ProxyHeaderV1, RejectsNulAndBareLineFeedsInsideTheLine) {
    // Found by the fuzzer: inet_pton stops at a NUL, so "2::\0junk" read as "2::".
    std::string nul("PROXY TCP6 2::\0x ::1 1 2\r\n", 27);
    EXPECT_EQ(parse(bytes_of(nul)).status, Status::Malformed);
    EXPECT_EQ(parse(bytes_of("PROXY TCP4 1.2.3.4\n5.6.7.8 1 2\r\n")).status, Status::Malformed);
}

TEST(ProxyHeaderV1, LongerThan107BytesIsOversized) {
    // Appended rather than joined with operator+: at -O3 GCC 12 reports a false
    // -Warray-bounds in the moved-from temporary (GCC bug 105329's family).
    const auto header = [](std::size_t filler, std::string_view end) {
        std::string out = "PROXY UNKNOWN ";
        out.append(filler, 'x');
        out.append(end);
        return out;
    };
    std::string in = header(200, "");
    EXPECT_EQ(parse(bytes_of(in)).status, Status::Oversized);
    // 107 bytes exactly, CRLF included, is the longest allowed (spec 2.1).
    std::string longest = header(107 - 16, "\r\n");
    ASSERT_EQ(longest.size(), 107u);
    EXPECT_EQ(parse(bytes_of(longest)).status, Status::Done);
    std::string one_more = header(107 - 15, "\r\n");
    EXPECT_EQ(parse(bytes_of(one_more)).status, Status::Oversized);
}

TEST(ProxyHeaderV1, WritesWhatItParses) {
    std::vector<std::byte> out;
    SocketAddress s = v4("203.0.113.7", 51000);
    SocketAddress d = v4("10.0.0.1", 443);
    write_v1(out, &s, &d);
    EXPECT_EQ(text_of(out), "PROXY TCP4 203.0.113.7 10.0.0.1 51000 443\r\n");
    out.clear();
    SocketAddress s6 = v6("2001:db8::7", 1);
    SocketAddress d6 = v6("::1", 2);
    write_v1(out, &s6, &d6);
    EXPECT_EQ(text_of(out), "PROXY TCP6 2001:db8::7 ::1 1 2\r\n");
    out.clear();
    write_v1(out, nullptr, nullptr); // a Unix client
    EXPECT_EQ(text_of(out), "PROXY UNKNOWN\r\n");
    out.clear();
    write_v1(out, &s, &d6); // mixed: IPv4 written IPv4-mapped
    EXPECT_EQ(text_of(out), "PROXY TCP6 ::ffff:203.0.113.7 ::1 51000 2\r\n");
}

TEST(ProxyHeaderV2, RoundTripsTcp4Tcp6AndTlvs) {
    for (bool six : {false, true}) {
        SocketAddress s = six ? v6("2001:db8::7", 40000) : v4("198.51.100.2", 40000);
        SocketAddress d = six ? v6("2001:db8::1", 8443) : v4("198.51.100.1", 8443);
        std::vector<std::byte> tlvs;
        std::string authority = "example.com";
        append_tlv(tlvs, kTlvAuthority, bytes_of(authority));
        std::vector<std::byte> out;
        write_v2(out, &s, &d, tlvs);
        EXPECT_EQ(out.size(), 16u + (six ? 36u : 12u) + 3u + authority.size());
        std::string stream = "after";
        std::vector<std::byte> input = out;
        input.insert(input.end(), bytes_of(stream).begin(), bytes_of(stream).end());
        ParseResult r = parse(input);
        ASSERT_EQ(r.status, Status::Done);
        EXPECT_EQ(r.consumed, out.size());
        EXPECT_EQ(r.header.version, Version::V2);
        EXPECT_EQ(host_of(r.header.source), host_of(s));
        EXPECT_EQ(port_of(r.header.source), 40000);
        EXPECT_EQ(port_of(r.header.destination), 8443);
        ASSERT_EQ(r.header.tlvs.size(), 1u);
        EXPECT_EQ(r.header.tlvs[0].type, kTlvAuthority);
        EXPECT_EQ(std::string(reinterpret_cast<const char*>(r.header.tlvs[0].value.data()),
                              r.header.tlvs[0].value.size()),
                  authority);
        for (std::size_t n = 0; n < out.size(); ++n)
            EXPECT_EQ(parse(std::span(out).first(n)).status, Status::NeedMore) << n;
    }
}

TEST(ProxyHeaderV2, LocalForUnixClientsAndIgnoredOnInput) {
    std::vector<std::byte> out;
    write_v2(out, nullptr, nullptr);
    ASSERT_EQ(out.size(), 16u);
    EXPECT_EQ(static_cast<uint8_t>(out[12]), 0x20); // version 2, LOCAL
    EXPECT_EQ(static_cast<uint8_t>(out[13]), 0x00); // AF_UNSPEC
    ParseResult r = parse(out);
    ASSERT_EQ(r.status, Status::Done);
    EXPECT_TRUE(r.header.unknown);
}

std::vector<std::byte> v2_with(uint8_t version_command, uint8_t family, uint16_t length,
                               std::size_t body) {
    SocketAddress s = v4("1.2.3.4", 1);
    std::vector<std::byte> out;
    write_v2(out, &s, &s);
    out.resize(16);
    out[12] = std::byte{version_command};
    out[13] = std::byte{family};
    out[14] = std::byte{static_cast<uint8_t>(length >> 8)};
    out[15] = std::byte{static_cast<uint8_t>(length)};
    out.resize(16 + body, std::byte{0});
    return out;
}

TEST(ProxyHeaderV2, RejectsBadBlocks) {
    EXPECT_EQ(parse(v2_with(0x11, 0x11, 12, 12)).status, Status::Malformed); // version 1
    EXPECT_EQ(parse(v2_with(0x22, 0x11, 12, 12)).status, Status::Malformed); // command 2
    EXPECT_EQ(parse(v2_with(0x21, 0x41, 12, 12)).status, Status::Malformed); // family 4
    EXPECT_EQ(parse(v2_with(0x21, 0x12, 12, 12)).status, Status::Malformed); // UDP
    EXPECT_EQ(parse(v2_with(0x21, 0x11, 8, 8)).status, Status::Malformed);   // short block
    EXPECT_EQ(parse(v2_with(0x21, 0x21, 12, 12)).status, Status::Malformed); // v6 in 12
    auto truncated_tlv = v2_with(0x21, 0x11, 14, 14);                        // 2 TLV bytes
    EXPECT_EQ(parse(truncated_tlv).status, Status::Malformed);
    auto long_tlv = v2_with(0x21, 0x11, 16, 16);
    long_tlv[28] = std::byte{kTlvAlpn};
    long_tlv[30] = std::byte{9}; // claims 9 bytes, has 1
    EXPECT_EQ(parse(long_tlv).status, Status::Malformed);
    // Longer than the caller takes: known from the length field, before the bytes come.
    EXPECT_EQ(parse(v2_with(0x21, 0x11, 20000, 0), 16 * 1024).status, Status::Oversized);
    // A wrong signature byte anywhere is not a PROXY header.
    auto sig = v2_with(0x21, 0x11, 12, 12);
    sig[7] = std::byte{'X'};
    EXPECT_EQ(parse(sig).status, Status::Malformed);
}

} // namespace
} // namespace uringfwd::engine::proxy
