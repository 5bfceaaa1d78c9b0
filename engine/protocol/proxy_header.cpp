#include "protocol/proxy_header.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <string>

namespace uringfwd::engine::proxy {

namespace {

constexpr std::string_view kV1Prefix = "PROXY ";
// spec §2.2: "\r\n\r\n\0\r\nQUIT\n", chosen so that no valid text protocol starts so.
constexpr std::array<uint8_t, 12> kV2Signature = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D,
                                                  0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A};
// spec §2.2: the address block sizes of AF_INET, AF_INET6 and AF_UNIX.
constexpr std::size_t kV2Inet = 12;
constexpr std::size_t kV2Inet6 = 36;
constexpr std::size_t kV2Unix = 216;

ParseResult fail(Status status, std::string_view why) {
    ParseResult r;
    r.status = status;
    r.error = why;
    return r;
}

uint8_t byte_at(std::span<const std::byte> in, std::size_t i) {
    return static_cast<uint8_t>(in[i]);
}

// ---------------------------------------------------------------- version 1 (spec §2.1)

// A port: 1 to 5 digits, at most 65535.
bool parse_port(std::string_view text, uint16_t& port) {
    if (text.empty() || text.size() > 5)
        return false;
    unsigned value = 0;
    for (char c : text) {
        if (c < '0' || c > '9')
            return false;
        value = value * 10 + static_cast<unsigned>(c - '0');
    }
    if (value > 65535)
        return false;
    port = static_cast<uint16_t>(value);
    return true;
}

// An address of `family` in its text form, with the port.
bool make_address(int family, std::string_view host, uint16_t port, SocketAddress& out) {
    // inet_pton needs a terminated string; the longest IPv6 text is 45 characters.
    char text[64];
    if (host.empty() || host.size() >= sizeof(text) || host.find('\0') != std::string_view::npos)
        return false; // a NUL would end the text early: "2::\0junk" is not "2::"
    std::memcpy(text, host.data(), host.size());
    text[host.size()] = '\0';
    out = SocketAddress{};
    if (family == AF_INET) {
        auto* in = reinterpret_cast<sockaddr_in*>(&out.storage);
        in->sin_family = AF_INET;
        in->sin_port = htons(port);
        if (inet_pton(AF_INET, text, &in->sin_addr) != 1)
            return false;
        out.length = sizeof(sockaddr_in);
    } else {
        auto* in6 = reinterpret_cast<sockaddr_in6*>(&out.storage);
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(port);
        if (inet_pton(AF_INET6, text, &in6->sin6_addr) != 1)
            return false;
        out.length = sizeof(sockaddr_in6);
    }
    return true;
}

// Splits off the text up to the next single space.
std::string_view next_field(std::string_view& rest) {
    std::size_t space = rest.find(' ');
    std::string_view field = rest.substr(0, space);
    rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
    return field;
}

ParseResult parse_v1(std::span<const std::byte> input) {
    std::string_view text(reinterpret_cast<const char*>(input.data()),
                          std::min(input.size(), kV1MaxLength));
    std::size_t prefix = std::min(text.size(), kV1Prefix.size());
    if (text.substr(0, prefix) != kV1Prefix.substr(0, prefix))
        return fail(Status::Malformed, "not a PROXY header");
    std::size_t cr = text.find('\r');
    if (cr == std::string_view::npos) {
        if (text.find('\n') != std::string_view::npos)
            return fail(Status::Malformed, "v1: a line feed without a carriage return");
        if (text.size() >= kV1MaxLength)
            return fail(Status::Oversized, "v1: no CRLF within 107 bytes");
        return {};
    }
    if (cr + 1 >= text.size()) {
        if (cr + 1 >= kV1MaxLength)
            return fail(Status::Oversized, "v1: no CRLF within 107 bytes");
        return {}; // the LF may follow
    }
    if (text[cr + 1] != '\n')
        return fail(Status::Malformed, "v1: a carriage return without a line feed");
    if (text.substr(0, cr).find('\n') != std::string_view::npos)
        return fail(Status::Malformed, "v1: a line feed without a carriage return");
    std::string_view line = text.substr(kV1Prefix.size(), cr - kV1Prefix.size());
    ParseResult r;
    r.status = Status::Done;
    r.consumed = cr + 2;
    r.header.version = Version::V1;
    std::string_view rest = line;
    std::string_view protocol = next_field(rest);
    if (protocol == "UNKNOWN")
        return r; // the rest of the line is to be ignored (spec §2.1)
    int family = protocol == "TCP4" ? AF_INET : protocol == "TCP6" ? AF_INET6 : AF_UNSPEC;
    if (family == AF_UNSPEC)
        return fail(Status::Malformed, "v1: the protocol is not TCP4, TCP6 or UNKNOWN");
    std::string_view source = next_field(rest);
    std::string_view destination = next_field(rest);
    std::string_view source_port = next_field(rest);
    std::string_view destination_port = rest; // the last field: no space may follow
    uint16_t sport = 0;
    uint16_t dport = 0;
    if (!parse_port(source_port, sport) || !parse_port(destination_port, dport))
        return fail(Status::Malformed, "v1: a port is not a number from 0 to 65535");
    if (!make_address(family, source, sport, r.header.source) ||
        !make_address(family, destination, dport, r.header.destination))
        return fail(Status::Malformed, "v1: an address does not match the protocol");
    r.header.unknown = false;
    return r;
}

// ---------------------------------------------------------------- version 2 (spec §2.2)

void copy_address(SocketAddress& out, int family, const uint8_t* addr, const uint8_t* port) {
    out = SocketAddress{};
    if (family == AF_INET) {
        auto* in = reinterpret_cast<sockaddr_in*>(&out.storage);
        in->sin_family = AF_INET;
        std::memcpy(&in->sin_addr, addr, 4);
        std::memcpy(&in->sin_port, port, 2); // both in network order already
        out.length = sizeof(sockaddr_in);
    } else {
        auto* in6 = reinterpret_cast<sockaddr_in6*>(&out.storage);
        in6->sin6_family = AF_INET6;
        std::memcpy(&in6->sin6_addr, addr, 16);
        std::memcpy(&in6->sin6_port, port, 2);
        out.length = sizeof(sockaddr_in6);
    }
}

ParseResult parse_v2(std::span<const std::byte> input, std::size_t max_length) {
    std::size_t have = std::min(input.size(), kV2Signature.size());
    for (std::size_t i = 0; i < have; ++i)
        if (byte_at(input, i) != kV2Signature[i])
            return fail(Status::Malformed, "not a PROXY header");
    if (input.size() < kV2FixedLength)
        return {};
    uint8_t version_command = byte_at(input, 12);
    if (version_command >> 4 != 2)
        return fail(Status::Malformed, "v2: the version is not 2");
    uint8_t command = version_command & 0x0F; // 0: LOCAL, 1: PROXY
    if (command > 1)
        return fail(Status::Malformed, "v2: the command is neither LOCAL nor PROXY");
    uint8_t family = byte_at(input, 13) >> 4;      // 0 UNSPEC, 1 INET, 2 INET6, 3 UNIX
    uint8_t transport = byte_at(input, 13) & 0x0F; // 0 UNSPEC, 1 STREAM, 2 DGRAM
    if (family > 3 || transport > 2)
        return fail(Status::Malformed, "v2: an unknown address family or transport");
    std::size_t length = static_cast<std::size_t>(byte_at(input, 14)) << 8 |
                         static_cast<std::size_t>(byte_at(input, 15));
    std::size_t total = kV2FixedLength + length;
    if (total > max_length)
        return fail(Status::Oversized, "v2: longer than the engine accepts");
    if (input.size() < total)
        return {};

    ParseResult r;
    r.status = Status::Done;
    r.consumed = total;
    r.header.version = Version::V2;
    if (command == 0)
        return r; // LOCAL: the address block and TLVs are to be ignored (spec §2.2)
    std::size_t block = family == 1 ? kV2Inet : family == 2 ? kV2Inet6 : family == 3 ? kV2Unix : 0;
    if (length < block)
        return fail(Status::Malformed, "v2: the length is shorter than the addresses");
    const auto* a = reinterpret_cast<const uint8_t*>(input.data()) + kV2FixedLength;
    if (family == 1 || family == 2) {
        if (transport != 1)
            return fail(Status::Malformed, "v2: not a stream connection");
        int af = family == 1 ? AF_INET : AF_INET6;
        std::size_t size = family == 1 ? 4 : 16;
        copy_address(r.header.source, af, a, a + 2 * size);
        copy_address(r.header.destination, af, a + size, a + 2 * size + 2);
        r.header.unknown = false;
    }
    // The rest of the block is TLVs: type, 16-bit length, value (spec §2.2).
    std::size_t at = kV2FixedLength + block;
    while (at < total) {
        if (total - at < 3)
            return fail(Status::Malformed, "v2: a truncated TLV");
        uint8_t type = byte_at(input, at);
        std::size_t size = static_cast<std::size_t>(byte_at(input, at + 1)) << 8 |
                           static_cast<std::size_t>(byte_at(input, at + 2));
        if (total - at - 3 < size)
            return fail(Status::Malformed, "v2: a TLV runs past the header");
        r.header.tlvs.push_back({type, input.subspan(at + 3, size)});
        at += 3 + size;
    }
    return r;
}

// ---------------------------------------------------------------- writing

void append(std::vector<std::byte>& out, const void* data, std::size_t size) {
    const auto* p = static_cast<const std::byte*>(data);
    out.insert(out.end(), p, p + size);
}

bool is_inet(const SocketAddress* a) {
    return a != nullptr && (a->family() == AF_INET || a->family() == AF_INET6);
}

// Both addresses in one family: IPv6 (an IPv4 one mapped) if either is IPv6.
struct Pair {
    int family;
    uint8_t source[16];
    uint8_t destination[16];
    uint16_t source_port; // network order
    uint16_t destination_port;
};

void raw(const SocketAddress& a, int family, uint8_t* addr, uint16_t& port) {
    if (a.family() == AF_INET) {
        const auto* in = reinterpret_cast<const sockaddr_in*>(&a.storage);
        port = in->sin_port;
        if (family == AF_INET) {
            std::memcpy(addr, &in->sin_addr, 4);
        } else { // ::ffff:a.b.c.d (RFC 4291 §2.5.5.2)
            std::memset(addr, 0, 10);
            addr[10] = addr[11] = 0xff;
            std::memcpy(addr + 12, &in->sin_addr, 4);
        }
    } else {
        const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&a.storage);
        port = in6->sin6_port;
        std::memcpy(addr, &in6->sin6_addr, 16);
    }
}

Pair pair_of(const SocketAddress& source, const SocketAddress& destination) {
    Pair p{};
    p.family = source.family() == AF_INET && destination.family() == AF_INET ? AF_INET : AF_INET6;
    raw(source, p.family, p.source, p.source_port);
    raw(destination, p.family, p.destination, p.destination_port);
    return p;
}

} // namespace

ParseResult parse(std::span<const std::byte> input, std::size_t max_length) {
    if (input.empty())
        return {};
    // spec §2: the first byte tells them apart ('P' or '\r').
    if (byte_at(input, 0) == kV2Signature[0])
        return parse_v2(input, std::max(max_length, kV2FixedLength));
    return parse_v1(input);
}

void write_v1(std::vector<std::byte>& out, const SocketAddress* source,
              const SocketAddress* destination) {
    if (!is_inet(source) || !is_inet(destination)) {
        append(out, "PROXY UNKNOWN\r\n", 15);
        return;
    }
    Pair p = pair_of(*source, *destination);
    char s[INET6_ADDRSTRLEN] = {};
    char d[INET6_ADDRSTRLEN] = {};
    inet_ntop(p.family, p.source, s, sizeof(s));
    inet_ntop(p.family, p.destination, d, sizeof(d));
    std::string line = std::string("PROXY ") + (p.family == AF_INET ? "TCP4 " : "TCP6 ") + s + " " +
                       d + " " + std::to_string(ntohs(p.source_port)) + " " +
                       std::to_string(ntohs(p.destination_port)) + "\r\n";
    append(out, line.data(), line.size());
}

void write_v2(std::vector<std::byte>& out, const SocketAddress* source,
              const SocketAddress* destination, std::span<const std::byte> tlvs) {
    append(out, kV2Signature.data(), kV2Signature.size());
    bool known = is_inet(source) && is_inet(destination);
    Pair p{};
    std::size_t block = 0;
    if (known) {
        p = pair_of(*source, *destination);
        block = p.family == AF_INET ? kV2Inet : kV2Inet6;
    }
    // Version 2; command PROXY (1), or LOCAL (0) with AF_UNSPEC when there is nothing to
    // tell (spec §2.2); transport STREAM.
    uint8_t version_command = known ? 0x21 : 0x20;
    uint8_t family_transport = !known ? 0x00 : p.family == AF_INET ? 0x11 : 0x21;
    std::size_t length = std::min<std::size_t>(block + tlvs.size(), 0xFFFF);
    std::size_t tlv_room = length - block; // the length field caps what fits
    uint8_t fixed[4] = {version_command, family_transport, static_cast<uint8_t>(length >> 8),
                        static_cast<uint8_t>(length & 0xff)};
    append(out, fixed, sizeof(fixed));
    if (known) {
        std::size_t size = p.family == AF_INET ? 4 : 16;
        append(out, p.source, size);
        append(out, p.destination, size);
        append(out, &p.source_port, 2);
        append(out, &p.destination_port, 2);
    }
    append(out, tlvs.data(), tlv_room);
}

void append_tlv(std::vector<std::byte>& out, uint8_t type, std::span<const std::byte> value) {
    std::size_t size = std::min<std::size_t>(value.size(), 0xFFFF);
    uint8_t head[3] = {type, static_cast<uint8_t>(size >> 8), static_cast<uint8_t>(size & 0xff)};
    append(out, head, sizeof(head));
    append(out, value.data(), size);
}

} // namespace uringfwd::engine::proxy
