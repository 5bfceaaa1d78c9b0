// Endpoint text syntax. Purely syntactic: no name resolution happens here, so parsing is
// deterministic and cheap enough to run on every configuration reload and under a fuzzer.
#include "uringfwd/endpoint.hpp"

#include "support/quote_input.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <cstddef>
#include <stdexcept>
#include <sys/un.h>

namespace uringfwd {
namespace {

constexpr std::string_view kUnixPrefix = "unix:";
// sun_path holds 108 bytes and a filesystem path needs one for its terminating NUL. The
// same limit applies to "@name" (the '@' becomes the leading NUL), which leaves room for a
// terminator there too, so the address layer can treat both forms alike.
constexpr std::size_t kMaxUnixPath = sizeof(sockaddr_un::sun_path) - 1;

[[noreturn]] void fail(std::string_view text, std::string_view why) {
    throw std::invalid_argument(fmt::format("bad address {}: {}", quote_input(text), why));
}

bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

bool is_host_char(char c) {
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' || c == '-';
}

// Strict decimal: std::stoi-style parsing would accept signs, spaces and trailing junk.
uint16_t parse_port(std::string_view text, std::string_view port) {
    if (port.empty()) {
        fail(text, "missing port after ':' (expected 0-65535)");
    }
    unsigned value = 0;
    for (const char c : port) {
        if (!is_digit(c)) {
            fail(text, "port must be a decimal number 0-65535");
        }
        value = value * 10 + static_cast<unsigned>(c - '0');
        // Checked per digit so arbitrarily long inputs cannot overflow.
        if (value > 65535) {
            fail(text, "port must be 0-65535");
        }
    }
    return static_cast<uint16_t>(value);
}

Endpoint parse_unix(std::string_view text) {
    const std::string_view path = text.substr(kUnixPrefix.size());
    if (path.empty()) {
        fail(text, "expected a socket path or @name after \"unix:\"");
    }
    if (path == "@") {
        fail(text, "abstract socket name after '@' must not be empty");
    }
    if (path.size() > kMaxUnixPath) {
        fail(text, fmt::format("unix socket path is {} bytes, at most {} fit in sun_path",
                               path.size(), kMaxUnixPath));
    }
    // A NUL would silently cut a filesystem path short; abstract names cannot express
    // one through this syntax either, so it is never what the user meant.
    if (path.find('\0') != std::string_view::npos) {
        fail(text, "unix socket path must not contain a NUL byte");
    }
    Endpoint e;
    e.kind = Endpoint::Kind::Unix;
    e.host = std::string(path);
    return e;
}

Endpoint parse_inet6(std::string_view text) {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos) {
        fail(text, "missing ']' after IPv6 address (expected \"[addr]:port\")");
    }
    const std::string host(text.substr(1, close - 1));
    in6_addr addr{};
    if (host.empty() || inet_pton(AF_INET6, host.c_str(), &addr) != 1) {
        fail(text, "not a valid IPv6 address inside [...]");
    }
    const std::string_view rest = text.substr(close + 1);
    if (rest.empty() || rest.front() != ':') {
        fail(text, "expected ':port' after ']'");
    }
    Endpoint e;
    e.kind = Endpoint::Kind::Inet6;
    e.host = host;
    e.port = parse_port(text, rest.substr(1));
    return e;
}

Endpoint parse_inet(std::string_view text) {
    const std::size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) {
        fail(text, "missing ':port' (expected \"host:port\", \"[v6]:port\" or \"unix:path\")");
    }
    const std::string_view host = text.substr(0, colon);
    if (host.find(':') != std::string_view::npos) {
        fail(text, "IPv6 addresses must be in brackets, as in \"[::1]:9000\"");
    }
    bool numeric = true;
    for (const char c : host) {
        if (!is_host_char(c)) {
            fail(text, "host may contain only letters, digits, '.' and '-'");
        }
        numeric = numeric && (is_digit(c) || c == '.');
    }
    // All digits and dots cannot be a host name, so anything short of a full dotted quad
    // ("10.1", "300.0.0.1") is a typo rather than something for the resolver to guess at.
    if (!host.empty() && numeric) {
        const std::string copy(host);
        in_addr addr{};
        if (inet_pton(AF_INET, copy.c_str(), &addr) != 1) {
            fail(text, "not a valid IPv4 address (expected a.b.c.d, each 0-255)");
        }
    }
    Endpoint e;
    e.kind = Endpoint::Kind::Inet;
    e.host = std::string(host);
    e.port = parse_port(text, text.substr(colon + 1));
    return e;
}

} // namespace

Endpoint Endpoint::parse(std::string_view text) {
    if (text.empty()) {
        fail(text, "empty (expected \"host:port\", \"[v6]:port\" or \"unix:path\")");
    }
    if (text.starts_with(kUnixPrefix)) {
        return parse_unix(text);
    }
    if (text.front() == '[') {
        return parse_inet6(text);
    }
    return parse_inet(text);
}

std::string Endpoint::to_string() const {
    switch (kind) {
    case Kind::Unix:
        return fmt::format("{}{}", kUnixPrefix, host);
    case Kind::Inet6:
        return fmt::format("[{}]:{}", host, port);
    case Kind::Inet:
        break;
    }
    return fmt::format("{}:{}", host, port);
}

} // namespace uringfwd
