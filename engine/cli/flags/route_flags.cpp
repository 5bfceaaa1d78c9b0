// The route flags: the one route a command line without --config serves.
#include "cli/flags/duration_flag.hpp"
#include "cli/flags/flag_groups.hpp"
#include "cli/flags/flag_values.hpp"

#include <fmt/format.h>

#include <iterator>
#include <string>
#include <string_view>
#include <vector>

namespace uringfwd::cli {
namespace {

// The flags that say what to serve, each with what the configuration file says it
// with: a file's routes replace them, so beside --config each is refused, naming its key.
struct RouteFlag {
    const char* flag;
    const char* in_file;
};
constexpr RouteFlag kRouteFlags[] = {
    {"--listen", "listen"},
    {"--dual-stack", "dual_stack"},
    {"--upstream", "a [[route.upstream]] table (address = ...) per member"},
    {"--balance", "balance"},
    {"--retries", "retries"},
    {"--idle-timeout", "idle_timeout"},
    {"--max-connections", "max_connections"},
    {"--connect-timeout", "connect_timeout"},
    {"--accept-proxy", "accept_proxy"},
    {"--trusted-sources", "trusted_sources"},
    {"--send-proxy", "send_proxy"},
    {"--inspect-timeout", "inspect_timeout"},
    {"--allow", "allow"},
    {"--deny", "deny"},
};

// "10.0.0.0/8,::1/128" -> its CIDR ranges; fails naming `flag` and the entry that is none.
std::vector<std::string> cidr_list(const char* flag, std::string_view rest) {
    std::vector<std::string> out;
    while (!rest.empty()) {
        std::size_t comma = rest.find(',');
        std::string one(rest.substr(0, comma));
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
        if (const std::string error = cidr_problem(one); !error.empty())
            fail(fmt::format("{}: {}: {}", flag, one, error));
        out.push_back(std::move(one));
    }
    return out;
}

} // namespace

std::string route_flag_list() {
    std::string out;
    const std::size_t n = std::size(kRouteFlags);
    for (std::size_t i = 0; i < n; ++i)
        out += fmt::format("{}{}", i == 0 ? "" : i + 1 == n ? " and " : ", ", kRouteFlags[i].flag);
    return out;
}

void refuse_route_flags(const CLI::App& app) {
    for (const RouteFlag& route_flag : kRouteFlags)
        if (app.count(route_flag.flag) > 0)
            fail(fmt::format("{} is a route setting: with --config, use {} in the route's "
                             "[[route]] section",
                             route_flag.flag, route_flag.in_file));
}

void add_route_flags(CLI::App& app, Flags& flags) {
    app.add_option("-l,--listen", flags.listen,
                   "address to accept clients on: 127.0.0.1:9000, [::1]:9000, [::]:9000 (IPv6 "
                   "only, unless --dual-stack), unix:/path; give it several times for several");
    app.add_flag("--dual-stack", flags.dual_stack,
                 "a [::]:PORT listen address takes IPv4 clients too (IPV6_V6ONLY off)");
    app.add_option("-u,--upstream", flags.upstreams,
                   "address to forward to (same forms); give it several times for a pool");
    app.add_option("--balance", flags.balance,
                   "how a pool chooses: round-robin, least-active (per shard) or maglev "
                   "(consistent hashing of the client address)")
        ->check(CLI::IsMember({"round-robin", "least-active", "maglev"}))
        ->capture_default_str();
    app.add_option("--retries", flags.retries,
                   "after a refused or timed-out connect, try this many other pool members")
        ->check(CLI::Range(0u, 100u))
        ->capture_default_str();
    add_duration(app, "--idle-timeout", flags.idle_timeout,
                 "close a connection (FIN) when no byte moved either way for this long "
                 "(30s, 10m, 1h); 0 = never (the start warns)",
                 kIdleTimeout);
    app.add_option("--max-connections", flags.max_connections,
                   "open connections at most, all shards together; more clients wait in the "
                   "listen backlog; 0 = no limit")
        // CLI11 reads "-5" into a size_t by wrapping it round to 2^64 - 5.
        ->check(CLI::Validator(
            [](const std::string& text) {
                return text.starts_with('-') ? fmt::format("must be 0 or more, not \"{}\"", text)
                                             : std::string();
            },
            ""))
        ->default_str("0");
    app.add_flag("--accept-proxy", flags.accept_proxy,
                 "clients must start with a PROXY protocol v1 or v2 header (from a proxy in "
                 "front); its client address is the one used and passed on");
    app.add_option("--trusted-sources", flags.trusted_sources,
                   "with --accept-proxy: only these sources may send a header, e.g. "
                   "10.0.0.0/8,::1/128 (default: every source)");
    app.add_option("--send-proxy", flags.send_proxy,
                   "send a PROXY protocol header to the upstream before any client byte")
        ->check(CLI::IsMember({"off", "v1", "v2"}))
        ->capture_default_str();
    add_duration(app, "--inspect-timeout", flags.inspect_timeout,
                 "with --accept-proxy: reset a client whose header is not complete after "
                 "this long",
                 kInspectTimeout);
    add_duration(app, "--connect-timeout", flags.connect_timeout,
                 "give up on an upstream connect after this long", kConnectTimeout);
    app.add_option("--allow", flags.allow,
                   "only clients in these ranges may connect, e.g. 10.0.0.0/8,2001:db8::/32 "
                   "(with --accept-proxy: the PROXY header's address); others are reset");
    app.add_option("--deny", flags.deny,
                   "clients in these ranges are reset before any upstream work, e.g. "
                   "192.0.2.0/24; deny wins over --allow");
}

EngineConfig config_from_flags(const CLI::App& app, const Flags& flags) {
    if (flags.check)
        fail("--check needs --config FILE");
    // Required only without --config, so CLI11's ->required() cannot say it.
    if (app.count("--listen") == 0)
        fail("--listen is required (or --config FILE)");
    if (app.count("--upstream") == 0)
        fail("--upstream is required (or --config FILE)");
    EngineConfig config;
    // One route, as a file with one [[route]] would say it.
    RouteConfig route;
    route.name = "default";
    for (const std::string& text : flags.listen)
        route.listen.push_back(parse_endpoint("--listen", text));
    route.dual_stack = flags.dual_stack;
    for (const std::string& text : flags.upstreams)
        route.pool.members.push_back(UpstreamMember{parse_endpoint("--upstream", text)});
    route.pool.balance = *parse_balance_policy(flags.balance); // checked by IsMember
    route.pool.connect_timeout =
        duration_flag<std::chrono::milliseconds>(flags.connect_timeout, kConnectTimeout);
    route.pool.retries = flags.retries;
    route.idle_timeout = duration_flag<std::chrono::milliseconds>(flags.idle_timeout, kIdleTimeout);
    route.max_connections = flags.max_connections;
    route.accept_proxy = flags.accept_proxy;
    route.send_proxy = *parse_proxy_version(flags.send_proxy); // checked by IsMember
    route.inspect_timeout =
        duration_flag<std::chrono::milliseconds>(flags.inspect_timeout, kInspectTimeout);
    // Without --accept-proxy nothing is read before connecting, so both would be
    // ignored: a flag that does nothing is a mistake to say, not to swallow.
    for (const char* needs_proxy : {"--trusted-sources", "--inspect-timeout"})
        if (app.count(needs_proxy) > 0 && !flags.accept_proxy)
            fail(fmt::format("{} needs --accept-proxy", needs_proxy));
    if (app.count("--trusted-sources") > 0)
        route.trusted_sources = cidr_list("--trusted-sources", flags.trusted_sources);
    if (app.count("--allow") > 0)
        route.allow = cidr_list("--allow", flags.allow);
    if (app.count("--deny") > 0)
        route.deny = cidr_list("--deny", flags.deny);
    config.routes = {route};
    apply_engine_flags(app, flags, config);
    return config;
}

} // namespace uringfwd::cli
