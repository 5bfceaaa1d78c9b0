// An Endpoint turned into something bind(2)/connect(2) accept.
#pragma once

#include "uringfwd/endpoint.hpp"

#include <sys/socket.h>

namespace uringfwd::engine {

struct SocketAddress {
    sockaddr_storage storage{};
    socklen_t length = 0;

    int family() const { return storage.ss_family; }
    const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
    sockaddr* get() { return reinterpret_cast<sockaddr*>(&storage); }
};

// Resolves host names ("localhost") with getaddrinfo, so it may block: call it at
// start-up, never on the data path. Throws std::runtime_error with a one-line message.
SocketAddress resolve(const Endpoint& endpoint);

// The same for an upstream: a host name is looked up for A and AAAA records, and an
// IPv4 answer is taken when there is one (listen addresses stay IPv4 for a name).
SocketAddress resolve_upstream(const Endpoint& endpoint);

// The Endpoint a bound or connected address stands for (ports resolved).
Endpoint to_endpoint(const SocketAddress& address);

} // namespace uringfwd::engine
