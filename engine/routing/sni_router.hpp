// Choosing among the routes that share one listen address by what the client's TLS
// ClientHello asks for: its server name (SNI) and ALPN protocols. Pure logic.
//
// A route of the group matches on
//   server_names  exact names ("a.example") and wildcards ("*.b.example": any name that
//                 ends in ".b.example", one label deep or more, not "b.example" itself),
//                 compared without regard to ASCII case (DNS names are case-insensitive,
//                 RFC 4343 §3);
//   alpn          protocols, one of which the client must offer.
// A route with neither is the group's default: it takes clients whose name matches no
// route, clients that sent no server name, and clients that do not speak TLS at all.
//
// Precedence, first that applies: an exact name, then the longest wildcard, then routes
// with ALPN only (any name). At each of these levels a route whose ALPN list holds one
// of the client's protocols (the client's first choice that any route offers) beats a
// route of the same level without an ALPN list. Then the default; without one, no route.
#pragma once

#include "protocol/client_hello.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace uringfwd::engine {

struct SniRule {
    std::size_t route = 0;                 // index in the route table
    std::string route_name;                // for messages
    std::vector<std::string> server_names; // as configured
    std::vector<std::string> alpn;
};

// A server_names entry as configured: nullopt when it is valid, else why not.
std::optional<std::string> check_server_name(std::string_view name);
// An alpn entry: 1..255 bytes (RFC 7301 §3.1), printable ASCII here.
std::optional<std::string> check_alpn(std::string_view protocol);

class SniRouter {
public:
    // The routes of one listen address, in table order. Call problems() to learn whether
    // they make sense together; choose() works either way (first rule wins on a tie).
    explicit SniRouter(std::vector<SniRule> rules);

    // Each ambiguity, as a sentence: two defaults, one name (or name and protocol) in two
    // routes or twice in one, invalid names.
    std::vector<std::string> problems() const;

    // True when some route matches on names or ALPN: the listener must read the
    // ClientHello. False for a single plain route, which is then never delayed.
    bool needs_client_hello() const { return inspects_; }
    // The default's route index (SniRule::route), if the group has one.
    std::optional<std::size_t> default_route() const;

    // The route for a client: `hello` is null for a client that is not speaking TLS.
    // Allocation-free. nullopt: nothing matches and there is no default.
    std::optional<std::size_t> choose(const tls::ClientHelloInfo* hello) const;

private:
    struct Entry {
        std::string pattern;   // lower case; for a wildcard the suffix with its dot (".b.example")
        bool wildcard = false; // pattern is a suffix
        bool any_name = false; // an ALPN-only route
        std::size_t rule = 0;  // index into rules_
    };
    using Iter = std::vector<Entry>::const_iterator;
    // Among the entries [first, last) of one precedence level, the route for `hello`.
    std::optional<std::size_t> pick(Iter first, Iter last, const tls::ClientHelloInfo& hello) const;
    // The entries of `sorted` whose pattern equals `name`, ignoring case.
    static std::pair<Iter, Iter> find(const std::vector<Entry>& sorted, std::string_view name);
    void add_problems_of(const std::vector<Entry>& sorted, const char* what);

    std::vector<SniRule> rules_;
    std::vector<Entry> exact_;           // sorted by pattern
    std::vector<Entry> wildcard_;        // sorted by pattern (the suffix)
    std::vector<Entry> any_name_;        // ALPN-only routes, in table order
    std::optional<std::size_t> default_; // index into rules_
    std::vector<std::string> problems_;
    bool inspects_ = false;
};

} // namespace uringfwd::engine
