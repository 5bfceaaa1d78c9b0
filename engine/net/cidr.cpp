#include "net/cidr.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

namespace uringfwd::engine {

namespace {

bool prefix_matches(const uint8_t* a, const uint8_t* b, unsigned bits) {
    unsigned whole = bits / 8;
    if (std::memcmp(a, b, whole) != 0)
        return false;
    unsigned rest = bits % 8;
    if (rest == 0)
        return true;
    auto mask = static_cast<uint8_t>(0xff << (8 - rest));
    return (a[whole] & mask) == (b[whole] & mask);
}

bool host_bits_clear(const uint8_t* address, unsigned size, unsigned bits) {
    for (unsigned bit = bits; bit < size * 8; ++bit)
        if (address[bit / 8] & (0x80 >> (bit % 8)))
            return false;
    return true;
}

} // namespace

std::optional<Cidr> Cidr::parse(std::string_view text, std::string& error) {
    std::size_t slash = text.find('/');
    std::string host(text.substr(0, slash));
    Cidr out;
    unsigned size = 4;
    if (inet_pton(AF_INET, host.c_str(), out.address) == 1) {
        out.family = AF_INET;
    } else if (inet_pton(AF_INET6, host.c_str(), out.address) == 1) {
        out.family = AF_INET6;
        size = 16;
    } else {
        error = "not an IPv4 or IPv6 address";
        return std::nullopt;
    }
    out.prefix = size * 8;
    if (slash != std::string_view::npos) {
        std::string_view bits = text.substr(slash + 1);
        if (bits.empty() || bits.size() > 3) {
            error = "the prefix length after '/' must be a number";
            return std::nullopt;
        }
        unsigned value = 0;
        for (char c : bits) {
            if (c < '0' || c > '9') {
                error = "the prefix length after '/' must be a number";
                return std::nullopt;
            }
            value = value * 10 + static_cast<unsigned>(c - '0');
        }
        if (value > size * 8) {
            error = size == 4 ? "an IPv4 prefix has 0..32 bits" : "an IPv6 prefix has 0..128 bits";
            return std::nullopt;
        }
        out.prefix = value;
    }
    if (!host_bits_clear(out.address, size, out.prefix)) {
        error = "bits are set past the prefix length (did you mean the network address?)";
        return std::nullopt;
    }
    return out;
}

bool Cidr::contains(const sockaddr_storage& peer) const {
    const uint8_t* bytes = nullptr;
    int peer_family = peer.ss_family;
    if (peer_family == AF_INET) {
        bytes = reinterpret_cast<const uint8_t*>(
            &reinterpret_cast<const sockaddr_in*>(&peer)->sin_addr);
    } else if (peer_family == AF_INET6) {
        bytes = reinterpret_cast<const uint8_t*>(
            &reinterpret_cast<const sockaddr_in6*>(&peer)->sin6_addr);
        static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (family == AF_INET && std::memcmp(bytes, kMapped, 12) == 0) {
            bytes += 12; // ::ffff:a.b.c.d is a.b.c.d (RFC 4291 §2.5.5.2)
            peer_family = AF_INET;
        }
    } else {
        return false; // a Unix peer has no address to match
    }
    return peer_family == family && prefix_matches(bytes, address, prefix);
}

} // namespace uringfwd::engine
