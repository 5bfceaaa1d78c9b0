#include "routing/hash.hpp"

#include <cstring>

#include <netinet/in.h>

namespace uringfwd::engine {

namespace {

std::string_view bytes_of(const void* data, std::size_t size) {
    return {static_cast<const char*>(data), size};
}

} // namespace

uint64_t hash_client_address(const sockaddr_storage& address) {
    if (address.ss_family == AF_INET) {
        sockaddr_in v4;
        std::memcpy(&v4, &address, sizeof v4); // sockaddr_storage is only aligned storage
        return stable_hash(bytes_of(&v4.sin_addr, sizeof v4.sin_addr));
    }
    if (address.ss_family == AF_INET6) {
        sockaddr_in6 v6;
        std::memcpy(&v6, &address, sizeof v6);
        const auto* bytes = v6.sin6_addr.s6_addr;
        if (IN6_IS_ADDR_V4MAPPED(&v6.sin6_addr))
            return stable_hash(bytes_of(bytes + 12, 4));
        return stable_hash(bytes_of(bytes, 16));
    }
    return stable_hash({});
}

} // namespace uringfwd::engine
