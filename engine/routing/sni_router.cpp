#include "routing/sni_router.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace uringfwd::engine {

namespace {

constexpr std::size_t kLongestName = 253;     // RFC 1035 §2.3.4 (255 octets on the wire)
constexpr std::size_t kLongestLabel = 63;     // RFC 1035 §2.3.4
constexpr std::size_t kLongestProtocol = 255; // RFC 7301 §3.1 ProtocolName<1..2^8-1>

char lower(char c) {
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

std::string lowered(std::string_view text) {
    std::string out(text);
    std::transform(out.begin(), out.end(), out.begin(), lower);
    return out;
}

// <0, 0, >0 as `a` (any case) sorts before, with or after `b` (lower case).
int compare_folded(std::string_view a, std::string_view b) {
    std::size_t n = std::min(a.size(), b.size());
    for (std::size_t i = 0; i < n; ++i) {
        char x = lower(a[i]);
        if (x != b[i])
            return static_cast<unsigned char>(x) < static_cast<unsigned char>(b[i]) ? -1 : 1;
    }
    return a.size() == b.size() ? 0 : (a.size() < b.size() ? -1 : 1);
}

bool label_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
}

} // namespace

std::optional<std::string> check_server_name(std::string_view name) {
    std::string_view host = name;
    if (host.starts_with("*."))
        host.remove_prefix(2);
    if (host.empty() || name.size() > kLongestName)
        return fmt::format("must be a host name of 1..{} characters, or *. and one", kLongestName);
    std::size_t label = 0;
    for (std::size_t i = 0; i <= host.size(); ++i) {
        if (i == host.size() || host[i] == '.') {
            if (label == 0 || label > kLongestLabel)
                return fmt::format("has an empty label or one longer than {} characters "
                                   "(no leading, trailing or double dots)",
                                   kLongestLabel);
            label = 0;
        } else if (!label_char(host[i])) {
            return std::string("may hold letters, digits, '-', '_' and dots, with a '*.' "
                               "only at the front");
        } else {
            ++label;
        }
    }
    return std::nullopt;
}

std::optional<std::string> check_alpn(std::string_view protocol) {
    if (protocol.empty() || protocol.size() > kLongestProtocol)
        return fmt::format("must be 1..{} characters", kLongestProtocol);
    if (!std::all_of(protocol.begin(), protocol.end(), [](char c) { return c > ' ' && c < 127; }))
        return std::string("must be printable ASCII without spaces");
    return std::nullopt;
}

SniRouter::SniRouter(std::vector<SniRule> rules) : rules_(std::move(rules)) {
    for (std::size_t r = 0; r < rules_.size(); ++r) {
        SniRule& rule = rules_[r];
        for (const std::string& name : rule.server_names)
            if (auto why = check_server_name(name))
                problems_.push_back(fmt::format("route \"{}\": server name \"{}\" {}",
                                                rule.route_name, name, *why));
        for (std::string& protocol : rule.alpn)
            if (auto why = check_alpn(protocol))
                problems_.push_back(
                    fmt::format("route \"{}\": alpn \"{}\" {}", rule.route_name, protocol, *why));
        if (!rule.server_names.empty() || !rule.alpn.empty())
            inspects_ = true;
        if (rule.server_names.empty() && rule.alpn.empty()) {
            if (default_)
                problems_.push_back(
                    fmt::format("routes \"{}\" and \"{}\" share a listen address and neither has "
                                "server_names or alpn: only one may be the default",
                                rules_[*default_].route_name, rule.route_name));
            else
                default_ = r;
        } else if (rule.server_names.empty()) {
            any_name_.push_back({"", false, true, r});
        }
        for (const std::string& name : rule.server_names) {
            if (name.starts_with("*."))
                wildcard_.push_back({lowered(name.substr(1)), true, false, r});
            else
                exact_.push_back({lowered(name), false, false, r});
        }
    }
    auto by_pattern = [](const Entry& a, const Entry& b) {
        return a.pattern != b.pattern ? a.pattern < b.pattern : a.rule < b.rule;
    };
    std::sort(exact_.begin(), exact_.end(), by_pattern);
    std::sort(wildcard_.begin(), wildcard_.end(), by_pattern);
    add_problems_of(exact_, "server name");
    add_problems_of(wildcard_, "server name");
    add_problems_of(any_name_, "alpn-only route for");
    // An ALPN-only route beside a default is fine; two ALPN-only routes sharing a
    // protocol are caught above (their pattern is empty, so they compare equal).
}

void SniRouter::add_problems_of(const std::vector<Entry>& sorted, const char* what) {
    for (std::size_t i = 0; i < sorted.size(); ++i) {
        for (std::size_t j = i + 1; j < sorted.size() && sorted[j].pattern == sorted[i].pattern;
             ++j) {
            const SniRule& a = rules_[sorted[i].rule];
            const SniRule& b = rules_[sorted[j].rule];
            std::string shown = sorted[i].any_name   ? std::string("any name")
                                : sorted[i].wildcard ? "*" + sorted[i].pattern
                                                     : sorted[i].pattern;
            if (&a == &b) {
                problems_.push_back(
                    fmt::format("route \"{}\": {} \"{}\" is listed twice", a.route_name,
                                sorted[i].any_name ? "alpn" : "server name", shown));
                continue;
            }
            if (a.alpn.empty() && b.alpn.empty()) {
                problems_.push_back(fmt::format("{} \"{}\" is in routes \"{}\" and \"{}\" of one "
                                                "listen address: a client could go to either",
                                                what, shown, a.route_name, b.route_name));
                continue;
            }
            for (const std::string& p : a.alpn) {
                if (std::find(b.alpn.begin(), b.alpn.end(), p) != b.alpn.end()) {
                    problems_.push_back(fmt::format(
                        "{} \"{}\" with alpn \"{}\" is in routes \"{}\" and \"{}\" of one "
                        "listen address: a client could go to either",
                        what, shown, p, a.route_name, b.route_name));
                    break;
                }
            }
        }
    }
}

std::vector<std::string> SniRouter::problems() const {
    return problems_;
}

std::pair<SniRouter::Iter, SniRouter::Iter> SniRouter::find(const std::vector<Entry>& sorted,
                                                            std::string_view name) {
    auto first = std::partition_point(sorted.begin(), sorted.end(), [&](const Entry& e) {
        return compare_folded(name, e.pattern) > 0;
    });
    auto last = std::partition_point(
        first, sorted.end(), [&](const Entry& e) { return compare_folded(name, e.pattern) == 0; });
    return {first, last};
}

std::optional<std::size_t> SniRouter::pick(Iter first, Iter last,
                                           const tls::ClientHelloInfo& hello) const {
    // The client's protocols in its order of preference: the first one a route offers.
    for (std::size_t p = 0; p < hello.alpn_count; ++p)
        for (Iter e = first; e != last; ++e) {
            const std::vector<std::string>& offered = rules_[e->rule].alpn;
            if (std::find(offered.begin(), offered.end(), hello.alpn[p]) != offered.end())
                return rules_[e->rule].route;
        }
    for (Iter e = first; e != last; ++e)
        if (rules_[e->rule].alpn.empty())
            return rules_[e->rule].route;
    return std::nullopt;
}

std::optional<std::size_t> SniRouter::default_route() const {
    if (default_)
        return rules_[*default_].route;
    return std::nullopt;
}

std::optional<std::size_t> SniRouter::choose(const tls::ClientHelloInfo* hello) const {
    auto fallback = [&] { return default_route(); };
    if (hello == nullptr)
        return fallback();
    std::string_view name = hello->server_name;
    if (!name.empty()) {
        auto [first, last] = find(exact_, name);
        if (auto route = pick(first, last, *hello))
            return route;
        // Longest suffix first: ".c.b.example" before ".b.example".
        for (std::size_t dot = name.find('.'); dot != std::string_view::npos && dot > 0;
             dot = name.find('.', dot + 1)) {
            auto [wfirst, wlast] = find(wildcard_, name.substr(dot));
            if (auto route = pick(wfirst, wlast, *hello))
                return route;
        }
    }
    if (auto route = pick(any_name_.begin(), any_name_.end(), *hello))
        return route;
    return fallback();
}

} // namespace uringfwd::engine
