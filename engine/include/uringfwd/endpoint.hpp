// A place to listen on or forward to: IPv4, IPv6 or a Unix stream socket path.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace uringfwd {

struct Endpoint {
    enum class Kind { Inet, Inet6, Unix };

    Kind kind = Kind::Inet;
    // Inet: dotted quad or a host name ("localhost"); empty means "any address".
    // Inet6: the address without brackets. Unix: the filesystem path, or "@name" for
    // the Linux abstract namespace.
    std::string host;
    uint16_t port = 0; // 0 = ephemeral (listen only)

    // Accepted forms: "127.0.0.1:9000", "localhost:9000", ":9000" (any IPv4 address),
    // "[::1]:9000", "[::]:9000", "unix:/run/app.sock", "unix:@abstract-name".
    // Throws std::invalid_argument with a message that names the problem.
    static Endpoint parse(std::string_view text);

    // The inverse of parse(): parse(e.to_string()) == e.
    std::string to_string() const;

    bool is_unix() const { return kind == Kind::Unix; }
    bool operator==(const Endpoint&) const = default;
};

} // namespace uringfwd
