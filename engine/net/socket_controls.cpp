#include "net/socket_controls.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace uringfwd::engine {

namespace {

void add_keepalive(const TcpKeepalive& k, std::vector<SocketOption>& out) {
    out.push_back({SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE"});
    if (k.idle)
        out.push_back(
            {IPPROTO_TCP, TCP_KEEPIDLE, static_cast<int>(k.idle->count()), "TCP_KEEPIDLE"});
    if (k.interval)
        out.push_back(
            {IPPROTO_TCP, TCP_KEEPINTVL, static_cast<int>(k.interval->count()), "TCP_KEEPINTVL"});
    if (k.count)
        out.push_back({IPPROTO_TCP, TCP_KEEPCNT, static_cast<int>(*k.count), "TCP_KEEPCNT"});
}

void keepalive_problems(const char* key, const std::optional<TcpKeepalive>& k,
                        std::vector<std::string>& out) {
    if (!k)
        return;
    const auto seconds = [&](const char* field, const std::optional<std::chrono::seconds>& v,
                             std::chrono::seconds max) {
        if (v && (v->count() < 1 || *v > max))
            out.push_back(fmt::format("{} {} must be 1..{} s (the kernel's range), not {} s", key,
                                      field, max.count(), v->count()));
    };
    seconds("idle", k->idle, kMaxKeepaliveIdle);
    seconds("interval", k->interval, kMaxKeepaliveInterval);
    if (k->count && (*k->count < 1 || *k->count > kMaxKeepaliveCount))
        out.push_back(fmt::format("{} count must be 1..{} (the kernel's range), not {}", key,
                                  kMaxKeepaliveCount, *k->count));
}

void user_timeout_problems(const char* key, std::chrono::milliseconds v,
                           std::vector<std::string>& out) {
    if (v.count() < 0 || v > kMaxUserTimeout)
        out.push_back(
            fmt::format("{} must be 0..{} ms, not {} ms", key, kMaxUserTimeout.count(), v.count()));
}

void source_problems(std::string_view key, const std::vector<std::string>& sources,
                     std::vector<std::string>& out) {
    for (const std::string& text : sources)
        if (std::string why = source_address_problem(text); !why.empty())
            out.push_back(fmt::format("{} \"{}\": {}", key, text, why));
}

} // namespace

SocketControls client_controls(const RouteConfig& route) {
    return {route.client_keepalive, route.client_user_timeout, std::nullopt, std::nullopt};
}

SocketControls upstream_controls(const RouteConfig& route) {
    return {route.upstream_keepalive, route.upstream_user_timeout, route.mark, route.tos};
}

std::vector<SocketOption> socket_options(const SocketControls& c, int family) {
    std::vector<SocketOption> out;
    if (family != AF_INET && family != AF_INET6)
        return out;
    if (c.keepalive)
        add_keepalive(*c.keepalive, out);
    if (c.user_timeout.count() > 0)
        out.push_back({IPPROTO_TCP, TCP_USER_TIMEOUT, static_cast<int>(c.user_timeout.count()),
                       "TCP_USER_TIMEOUT"});
    if (c.mark) // an unsigned 32-bit mark passed as the int the kernel reads it from
        out.push_back({SOL_SOCKET, SO_MARK, static_cast<int>(*c.mark), "SO_MARK"});
    if (c.tos) {
        const int tos = static_cast<int>(*c.tos);
        if (family == AF_INET)
            out.push_back({IPPROTO_IP, IP_TOS, tos, "IP_TOS"});
        else
            out.push_back({IPPROTO_IPV6, IPV6_TCLASS, tos, "IPV6_TCLASS"});
    }
    return out;
}

const std::vector<SocketOption>& FamilyOptions::of(int family) const {
    static const std::vector<SocketOption> kNone;
    if (family == AF_INET)
        return inet4;
    if (family == AF_INET6)
        return inet6;
    return kNone;
}

FamilyOptions family_options(const SocketControls& controls) {
    return {socket_options(controls, AF_INET), socket_options(controls, AF_INET6)};
}

std::optional<SocketAddress> parse_source_address(std::string_view text, std::string& error) {
    const std::string host(text);
    SocketAddress out;
    auto* v4 = reinterpret_cast<sockaddr_in*>(&out.storage);
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&out.storage);
    if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        out.length = sizeof(sockaddr_in);
        return out;
    }
    if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        out.length = sizeof(sockaddr_in6);
        return out;
    }
    error = host.find(':') != std::string::npos && host.find('.') != std::string::npos
                ? "not an IP address (a source takes no port: the kernel picks it)"
                : "not an IPv4 or IPv6 address";
    return std::nullopt;
}

const SocketAddress* pick_source(const std::vector<SocketAddress>& sources, int family,
                                 uint64_t turn) {
    std::size_t of_family = 0;
    for (const SocketAddress& s : sources)
        of_family += s.family() == family;
    if (of_family == 0)
        return nullptr;
    std::size_t want = static_cast<std::size_t>(turn % of_family);
    for (const SocketAddress& s : sources)
        if (s.family() == family && want-- == 0)
            return &s;
    return nullptr;
}

std::vector<std::string> socket_control_problems(const RouteConfig& route) {
    std::vector<std::string> out;
    keepalive_problems("client_keepalive", route.client_keepalive, out);
    keepalive_problems("upstream_keepalive", route.upstream_keepalive, out);
    user_timeout_problems("client_user_timeout", route.client_user_timeout, out);
    user_timeout_problems("upstream_user_timeout", route.upstream_user_timeout, out);
    if (route.tos && *route.tos > 255)
        out.push_back(fmt::format("tos must be 0..255, not {}", *route.tos));
    source_problems("source", route.source, out);
    if (route.transparent) {
        const bool member_source =
            std::any_of(route.pool.members.begin(), route.pool.members.end(),
                        [](const UpstreamMember& m) { return !m.source.empty(); });
        if (!route.source.empty() || member_source)
            out.push_back("transparent and source exclude each other: a transparent "
                          "connection's source is the client's address");
    }
    for (const UpstreamMember& m : route.pool.members) {
        if (m.source.empty())
            continue;
        const std::string member = m.name.empty() ? m.address.to_string() : m.name;
        if (m.address.is_unix())
            out.push_back(fmt::format("upstream {}: source is for TCP upstreams, not a Unix "
                                      "socket",
                                      member));
        source_problems(fmt::format("upstream {} source", member), m.source, out);
    }
    return out;
}

} // namespace uringfwd::engine
