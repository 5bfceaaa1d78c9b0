// An address range in CIDR notation ("10.0.0.0/8", "::1/128", a bare address for one
// host), and whether a socket address falls in it. Pure: no lookups, no syscalls.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace uringfwd::engine {

struct Cidr {
    int family = AF_INET; // AF_INET or AF_INET6
    uint8_t address[16] = {};
    unsigned prefix = 0; // leading bits that must match

    // Nullopt, with `error` set, for anything but an IPv4/IPv6 literal with an
    // optional "/bits" (0..32, 0..128). Bits set past the prefix are an error too: a
    // typo like "10.0.0.1/8" would otherwise trust far more than meant.
    static std::optional<Cidr> parse(std::string_view text, std::string& error);

    // Whether `peer` (AF_INET or AF_INET6; an IPv4-mapped IPv6 address counts as its
    // IPv4 address, as a dual-stack listener sees IPv4 clients) is in the range.
    bool contains(const sockaddr_storage& peer) const;
};

} // namespace uringfwd::engine
