#include "net/socket_address.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/un.h>

#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

namespace uringfwd::engine {

namespace {
SocketAddress resolve_unix(const Endpoint& e) {
    SocketAddress out;
    auto* un = reinterpret_cast<sockaddr_un*>(&out.storage);
    un->sun_family = AF_UNIX;
    if (e.host.size() >= sizeof(un->sun_path))
        throw std::runtime_error(fmt::format("unix socket path too long: {}", e.host));
    std::memcpy(un->sun_path, e.host.data(), e.host.size());
    bool abstract = !e.host.empty() && e.host[0] == '@';
    if (abstract)
        un->sun_path[0] = '\0'; // Linux abstract namespace: leading NUL, no terminator
    out.length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + e.host.size() +
                                        (abstract ? 0 : 1));
    return out;
}

SocketAddress resolve_inet(const Endpoint& e) {
    SocketAddress out;
    auto* in = reinterpret_cast<sockaddr_in*>(&out.storage);
    in->sin_family = AF_INET;
    in->sin_port = htons(e.port);
    out.length = sizeof(sockaddr_in);
    if (e.host.empty()) {
        in->sin_addr.s_addr = htonl(INADDR_ANY);
        return out;
    }
    if (inet_pton(AF_INET, e.host.c_str(), &in->sin_addr) == 1)
        return out;
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    int rc = getaddrinfo(e.host.c_str(), nullptr, &hints, &found);
    if (rc != 0 || found == nullptr)
        throw std::runtime_error(fmt::format("cannot resolve {}: {}", e.host,
                                             rc != 0 ? gai_strerror(rc) : "no address"));
    in->sin_addr = reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr;
    freeaddrinfo(found);
    return out;
}

SocketAddress resolve_inet6(const Endpoint& e) {
    SocketAddress out;
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&out.storage);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(e.port);
    out.length = sizeof(sockaddr_in6);
    if (inet_pton(AF_INET6, e.host.c_str(), &in6->sin6_addr) != 1)
        throw std::runtime_error(fmt::format("bad IPv6 address: {}", e.host));
    return out;
}
} // namespace

SocketAddress resolve(const Endpoint& endpoint) {
    switch (endpoint.kind) {
    case Endpoint::Kind::Unix:
        return resolve_unix(endpoint);
    case Endpoint::Kind::Inet6:
        return resolve_inet6(endpoint);
    case Endpoint::Kind::Inet:
        break;
    }
    return resolve_inet(endpoint);
}

SocketAddress resolve_upstream(const Endpoint& endpoint) {
    in_addr literal{};
    if (endpoint.kind != Endpoint::Kind::Inet || endpoint.host.empty() ||
        inet_pton(AF_INET, endpoint.host.c_str(), &literal) == 1)
        return resolve(endpoint);
    // A and AAAA. An IPv4 answer wins when there is one: getaddrinfo's RFC 6724 order
    // puts ::1 before 127.0.0.1 for "localhost", and an upstream listening on IPv4
    // only is the common case this engine served before; a name with AAAA records
    // alone now works too.
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    int rc = getaddrinfo(endpoint.host.c_str(), nullptr, &hints, &found);
    if (rc != 0 || found == nullptr)
        throw std::runtime_error(fmt::format("cannot resolve {}: {}", endpoint.host,
                                             rc != 0 ? gai_strerror(rc) : "no address"));
    const addrinfo* best = found;
    for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
        if (a->ai_family == AF_INET) {
            best = a;
            break;
        }
    }
    SocketAddress out;
    std::memcpy(&out.storage, best->ai_addr, best->ai_addrlen);
    out.length = static_cast<socklen_t>(best->ai_addrlen);
    if (best->ai_family == AF_INET)
        reinterpret_cast<sockaddr_in*>(&out.storage)->sin_port = htons(endpoint.port);
    else
        reinterpret_cast<sockaddr_in6*>(&out.storage)->sin6_port = htons(endpoint.port);
    freeaddrinfo(found);
    return out;
}

Endpoint to_endpoint(const SocketAddress& address) {
    Endpoint e;
    char text[INET6_ADDRSTRLEN] = {};
    if (address.family() == AF_INET) {
        auto* in = reinterpret_cast<const sockaddr_in*>(&address.storage);
        inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
        e.kind = Endpoint::Kind::Inet;
        e.host = text;
        e.port = ntohs(in->sin_port);
    } else if (address.family() == AF_INET6) {
        auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address.storage);
        inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
        e.kind = Endpoint::Kind::Inet6;
        e.host = text;
        e.port = ntohs(in6->sin6_port);
    } else if (address.family() == AF_UNIX) {
        auto* un = reinterpret_cast<const sockaddr_un*>(&address.storage);
        e.kind = Endpoint::Kind::Unix;
        std::size_t n = address.length > offsetof(sockaddr_un, sun_path)
                            ? address.length - offsetof(sockaddr_un, sun_path)
                            : 0;
        if (n > 0 && un->sun_path[0] == '\0') {
            // Built in two steps: "@" + std::string(...) trips a GCC 12 -O3 false
            // positive (-Wrestrict, GCC bug 105329).
            e.host.assign(1, '@');
            e.host.append(un->sun_path + 1, n - 1);
        } else {
            e.host = std::string(un->sun_path, strnlen(un->sun_path, n));
        }
    }
    return e;
}

} // namespace uringfwd::engine
