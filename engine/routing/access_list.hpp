// Who may connect to a route: its `allow` and `deny` lists of CIDR ranges (issue 23).
// Deny wins; with an allow list every client it does not name is denied; with neither
// list everyone is let in. Pure: the caller passes the client's address (the socket's
// peer, or the PROXY header's with accept_proxy) and does the closing.
#pragma once

#include "net/cidr.hpp"

#include <sys/socket.h>

#include <optional>
#include <string>
#include <vector>

namespace uringfwd::engine {

class AccessList {
public:
    AccessList() = default;
    AccessList(std::vector<Cidr> allow, std::vector<Cidr> deny)
        : allow_(std::move(allow)), deny_(std::move(deny)) {}

    // Both lists parsed (Cidr::parse); nullopt with `error` naming the first entry that
    // is no CIDR range ("deny: 10.0.0.1/8: bits are set past the prefix").
    static std::optional<AccessList> parse(const std::vector<std::string>& allow,
                                           const std::vector<std::string>& deny,
                                           std::string& error);

    // No list: nothing to check, so a route without one pays nothing per connection.
    bool empty() const { return allow_.empty() && deny_.empty(); }

    // Whether `peer` may connect. An IPv4-mapped IPv6 address is judged as its IPv4
    // address (Cidr::contains), as a dual-stack listener sees IPv4 clients. An address
    // of no IP family (a Unix socket's peer) matches no range: an allow list denies it.
    bool admits(const sockaddr_storage& peer) const;

private:
    std::vector<Cidr> allow_;
    std::vector<Cidr> deny_;
};

} // namespace uringfwd::engine
