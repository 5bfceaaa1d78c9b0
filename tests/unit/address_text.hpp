// The socket address of an IPv4 or IPv6 literal, for unit tests of address matching
// (Cidr, AccessList, the per-source table); an empty (AF_UNSPEC) one for anything else.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

namespace uringfwd::engine {

inline sockaddr_storage address_of(const char* text) {
    sockaddr_storage s{};
    if (inet_pton(AF_INET, text, &reinterpret_cast<sockaddr_in*>(&s)->sin_addr) == 1)
        s.ss_family = AF_INET;
    else if (inet_pton(AF_INET6, text, &reinterpret_cast<sockaddr_in6*>(&s)->sin6_addr) == 1)
        s.ss_family = AF_INET6;
    return s;
}

} // namespace uringfwd::engine
