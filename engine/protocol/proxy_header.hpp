// The PROXY protocol (HAProxy, doc/proxy-protocol.txt in the haproxy source; sections
// cited as "spec §N"): the header a proxy puts before a TCP stream to tell the next hop
// who the client really is. Version 1 is one line of text (spec §2.1), version 2 a
// binary block with optional type-length-value extensions (spec §2.2).
//
// Pure code, no I/O: parse() looks at the bytes received so far and says whether a
// header is complete, and write_v1()/write_v2() append one to a buffer. Every read of
// the input is bounds-checked; the input comes from anyone who can connect.
#pragma once

#include "net/socket_address.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace uringfwd::engine::proxy {

enum class Version : uint8_t { V1 = 1, V2 = 2 };

// The longest v1 header, "PROXY TCP6 <39> <39> 65535 65535\r\n" (spec §2.1).
inline constexpr std::size_t kV1MaxLength = 107;
// A v2 header: the 16 fixed bytes (12-byte signature, version and command, family and
// protocol, 16-bit length), then `length` bytes of addresses and TLVs (spec §2.2).
inline constexpr std::size_t kV2FixedLength = 16;

// Registered TLV types (spec §2.2.1 - §2.2.7).
inline constexpr uint8_t kTlvAlpn = 0x01;
inline constexpr uint8_t kTlvAuthority = 0x02;
inline constexpr uint8_t kTlvCrc32c = 0x03;
inline constexpr uint8_t kTlvNoop = 0x04;
inline constexpr uint8_t kTlvUniqueId = 0x05;
inline constexpr uint8_t kTlvSsl = 0x20;
inline constexpr uint8_t kTlvNetns = 0x30;

struct Tlv {
    uint8_t type = 0;
    std::span<const std::byte> value; // a view into the parsed input
};

struct Header {
    Version version = Version::V1;
    // No addresses to take: v1 "UNKNOWN", v2 LOCAL (a proxy's own health check), or a
    // v2 family this forwarder has no use for (AF_UNSPEC, AF_UNIX). The receiver then
    // keeps the connection's real endpoints (spec §2.1, §2.2).
    bool unknown = true;
    SocketAddress source;      // AF_INET or AF_INET6 when !unknown
    SocketAddress destination; // likewise
    std::vector<Tlv> tlvs;     // v2 only, in the order received
};

enum class Status : uint8_t {
    NeedMore,  // a valid beginning of a header: read more
    Done,      // `consumed` bytes are the header
    Malformed, // not a PROXY header, or a broken one
    Oversized, // longer than the protocol allows, or than the caller's limit
};

struct ParseResult {
    Status status = Status::NeedMore;
    std::size_t consumed = 0;
    Header header;
    std::string_view error; // Malformed/Oversized: why, in a few words (static text)
};

// Looks for a header at the start of `input` (all bytes received so far). The version
// is recognised by its signature (spec §2: "PROXY " or the 12-byte v2 block).
// `max_length` caps a v2 header (16 + its length field) below the protocol's 65551.
ParseResult parse(std::span<const std::byte> input, std::size_t max_length = 16 * 1024);

// Appends a header for a TCP connection from `source` to `destination`. Addresses of
// AF_INET/AF_INET6 give TCP4/TCP6 (an IPv4 one is written IPv4-mapped beside an IPv6
// one); anything else (a Unix client, nullptr) gives v1 "UNKNOWN" / a v2 LOCAL header.
void write_v1(std::vector<std::byte>& out, const SocketAddress* source,
              const SocketAddress* destination);
// `tlvs`: already encoded TLVs (type, 16-bit big-endian length, value) to append.
void write_v2(std::vector<std::byte>& out, const SocketAddress* source,
              const SocketAddress* destination, std::span<const std::byte> tlvs = {});

// Appends one encoded TLV.
void append_tlv(std::vector<std::byte>& out, uint8_t type, std::span<const std::byte> value);

} // namespace uringfwd::engine::proxy
