#include "cli/flags.hpp"

#include "cli/control/control_flag.hpp"
#include "cli/process_log.hpp"
#include "uringfwd/config_file.hpp"
#include "uringfwd/cpu_list.hpp"
#include "uringfwd/messages.hpp"
#include "uringfwd/numa_topology.hpp"
#include "uringfwd/operations.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>

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
};

// "--listen, --dual-stack, ... and --inspect-timeout", for --config's help.
std::string route_flag_list() {
    std::string out;
    const std::size_t n = std::size(kRouteFlags);
    for (std::size_t i = 0; i < n; ++i)
        out += fmt::format("{}{}", i == 0 ? "" : i + 1 == n ? " and " : ", ", kRouteFlags[i].flag);
    return out;
}

std::vector<int> parse_cpus(const std::string& flag, const std::string& text) {
    try {
        return parse_cpu_list(text);
    } catch (const std::invalid_argument& e) {
        fail(fmt::format("{}: {}", flag, e.what()));
    }
}

// --numa-node: the CPUs of those nodes, further limited by --cpus when both are given.
std::vector<int> cpus_of_nodes(const std::string& nodes_text, const std::vector<int>& cpus) {
    std::vector<int> nodes = parse_cpus("--numa-node", nodes_text);
    std::vector<int> from_nodes;
    try {
        from_nodes = read_numa_topology().cpus_of_nodes(nodes);
    } catch (const std::exception& e) {
        fail(fmt::format("--numa-node: {}", e.what()));
    }
    if (cpus.empty())
        return from_nodes;
    std::vector<int> both;
    for (int cpu : cpus)
        if (std::find(from_nodes.begin(), from_nodes.end(), cpu) != from_nodes.end())
            both.push_back(cpu);
    if (both.empty())
        fail("--cpus and --numa-node have no CPU in common");
    return both;
}

Endpoint parse_endpoint(const std::string& flag, const std::string& text) {
    try {
        return Endpoint::parse(text);
    } catch (const std::invalid_argument& e) {
        fail(fmt::format("{}: {}", flag, e.what()));
    }
}

// What a duration flag accepts: the configuration file's syntax and, for the same
// setting, the file's range (engine_section.cpp, route_section.cpp).
struct DurationRange {
    std::chrono::microseconds min;
    std::optional<std::chrono::microseconds> max;
    bool micros = false; // "us" too (busy_poll)
};

using namespace std::chrono_literals;
constexpr DurationRange kConnectTimeout{1ms, 1h};
constexpr DurationRange kIdleTimeout{0us, std::nullopt};
constexpr DurationRange kInspectTimeout{1ms, 1h};
constexpr DurationRange kBusyPoll{0us, 1s, true};
constexpr DurationRange kBulkCoalesce{0us, 100ms, true};
constexpr DurationRange kBulkPark{0us, 1s};
constexpr DurationRange kDrainTimeout{0us, 24h};

// `text` as the file reads a duration (with "us" where the range allows it).
std::optional<std::chrono::microseconds> parse_flag_duration(const std::string& text,
                                                             const DurationRange& range,
                                                             std::string* why = nullptr) {
    if (range.micros)
        return parse_duration_us(text, why);
    if (auto ms = parse_duration(text, why))
        return *ms;
    return std::nullopt;
}

// The reason `text` is no duration within `range`, or "" when it is one.
std::string duration_problem(const std::string& text, const DurationRange& range) {
    std::string why;
    const std::optional<std::chrono::microseconds> value = parse_flag_duration(text, range, &why);
    if (!value)
        return fmt::format("{} {}", quote_input(text), why);
    if (*value < range.min || (range.max && *value > *range.max))
        return fmt::format("must be {}, not {}",
                           range.max ? fmt::format("{}..{}", format_duration(range.min),
                                                   format_duration(*range.max))
                                     : fmt::format("at least {}", format_duration(range.min)),
                           quote_input(text));
    return {};
}

// A duration flag: checked while parsing (CLI11 names the flag: "--idle-timeout: \"30\"
// has no unit (use ms, s, m or h; only 0 goes without)"), shown in --help as DURATION.
CLI::Option* add_duration(CLI::App& app, const char* name, std::string& into,
                          const std::string& help, DurationRange range) {
    return app.add_option(name, into, help)
        ->type_name("DURATION")
        ->check(CLI::Validator([range](std::string& text) { return duration_problem(text, range); },
                               ""))
        ->capture_default_str();
}

// The value of a duration flag its check accepted.
template <typename Duration> Duration duration_flag(const std::string& text, DurationRange range) {
    return std::chrono::duration_cast<Duration>(parse_flag_duration(text, range).value_or(0us));
}

// Each engine-wide flag that was given, over `config`. Without --config every default
// equals EngineConfig's, so writing only the given ones is the same as writing all.
void apply_engine_flags(const CLI::App& app, const Flags& flags, EngineConfig& config) {
    const auto given = [&](const char* name) { return app.count(name) > 0; };
    if (given("--max-pipes"))
        config.splice.max_pipes = flags.max_pipes;
    if (given("--pipe-size"))
        config.splice.pipe_size = flags.pipe_size;
    if (given("--shards"))
        config.placement.shards = flags.shards;
    // Together they name the CPUs; either replaces the file's cpus and numa_nodes.
    if (given("--cpus") || given("--numa-node")) {
        config.placement.cpus =
            flags.cpus.empty() ? std::vector<int>{} : parse_cpus("--cpus", flags.cpus);
        if (!flags.numa_nodes.empty())
            config.placement.cpus = cpus_of_nodes(flags.numa_nodes, config.placement.cpus);
    }
    if (given("--no-steering"))
        config.placement.steer_by_cpu = !flags.no_steering;
    if (given("--iowq-cpus"))
        config.placement.worker_placement =
            flags.iowq_cpus == "node" ? WorkerPlacement::ShardNode : WorkerPlacement::ShardCpu;
    if (given("--iowq-max-workers"))
        config.placement.iowq_max_workers = flags.iowq_max_workers;
    if (given("--direct-descriptors"))
        config.ring.direct_descriptors = *parse_direct_descriptors(flags.direct_descriptors);
    if (given("--data-path"))
        config.data_path = *parse_data_path(flags.data_path); // checked by IsMember
    if (given("--splice-mechanism"))
        config.splice.splice_mechanism =
            *parse_splice_mechanism(flags.splice_mechanism); // IsMember
    if (given("--copy-buffers"))
        config.copy.copy_buffers = flags.copy_buffers;
    if (given("--copy-buffer-size"))
        config.copy.copy_buffer_size = flags.copy_buffer_size;
    if (given("--bulk-buffers"))
        config.copy.bulk_buffers = flags.bulk_buffers;
    if (given("--bulk-buffer-size"))
        config.copy.bulk_buffer_size = flags.bulk_buffer_size;
    if (given("--busy-poll"))
        config.ring.busy_poll =
            duration_flag<std::chrono::microseconds>(flags.busy_poll, kBusyPoll);
    if (given("--bulk-park"))
        config.experimental.bulk_park =
            duration_flag<std::chrono::milliseconds>(flags.bulk_park, kBulkPark);
    if (given("--bulk-coalesce"))
        config.splice.bulk_coalesce =
            duration_flag<std::chrono::microseconds>(flags.bulk_coalesce, kBulkCoalesce);
    if (given("--drain-timeout"))
        config.drain_timeout =
            duration_flag<std::chrono::milliseconds>(flags.drain_timeout, kDrainTimeout);
    if (given("--log-level")) {
        const auto level = parse_log_level(flags.log_level);
        if (!level)
            fail(fmt::format("--log-level: \"{}\" is not one of error, warn, info, debug",
                             flags.log_level));
        config.log_level = *level;
    }
}

} // namespace

void fail(const std::string& message) {
    process_log().error("{}", message);
    std::exit(1);
}

void add_flags(CLI::App& app, Flags& flags) {
    app.add_option("-c,--config", flags.config_path,
                   "routes, pools and engine settings from a TOML file (see "
                   "examples/uring-fwd.toml); it replaces the route flags, " +
                       route_flag_list() +
                       ", which are refused beside it, and engine flags given as well override "
                       "its [engine] values");
    app.add_flag("--check", flags.check,
                 "with --config: check the file and exit, printing \"FILE: ok\" and its routes "
                 "(status 0) or every error as FILE:LINE: message (status 1)");
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
    app.add_option("--max-pipes", flags.max_pipes,
                   "pipes per shard at most; a direction that finds none waits for one")
        ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20))
        ->capture_default_str();
    app.add_option("--pipe-size", flags.pipe_size,
                   "pipe capacity to ask for in bytes (default: /proc/sys/fs/pipe-max-size)")
        ->check(CLI::Range(std::size_t{4096}, std::size_t{1} << 30));
    app.add_option("--log-level", flags.log_level, "error, warn, info or debug")
        ->capture_default_str();
    app.add_option("--shards", flags.shards,
                   "number of shards, one thread pinned per CPU (default: one per CPU allowed)");
    app.add_option("--cpus", flags.cpus, "CPUs to run shards on, e.g. 0-7,16-23");
    app.add_option("--numa-node", flags.numa_nodes,
                   "run shards only on these NUMA nodes' CPUs, e.g. 0");
    app.add_flag("--no-steering", flags.no_steering,
                 "spread connections by the kernel's hash, not by the CPU that received them");
    app.add_option("--iowq-cpus", flags.iowq_cpus,
                   "where a shard's io-wq workers run: cpu (its own) or node (its NUMA node; "
                   "Linux 6.2 and later keep them on its CPU, with a warning)")
        ->check(CLI::IsMember({"cpu", "node"}))
        ->capture_default_str();
    app.add_option("--iowq-max-workers", flags.iowq_max_workers,
                   "most io-wq kernel threads per shard (default: max-pipes + 4)")
        ->check(CLI::Range(1u, 1u << 16));
    app.add_option("--data-path", flags.data_path,
                   "how bytes move: splice (zero-copy, via io-wq kernel threads), copy "
                   "(receive + send, inline) or auto (per direction: copy small messages, "
                   "splice bulk)")
        ->check(CLI::IsMember({"splice", "copy", "auto"}))
        ->capture_default_str();
    app.add_option("--splice-mechanism", flags.splice_mechanism,
                   "how splices run: inline (non-blocking splice(2) on the shard's thread "
                   "once the ring reports the socket ready), ring (IORING_OP_SPLICE pairs, "
                   "each on an io-wq kernel thread) or auto (inline where it can be had)")
        ->check(CLI::IsMember({"auto", "ring", "inline"}))
        ->capture_default_str();
    app.add_option("--direct-descriptors", flags.direct_descriptors,
                   "sockets in each shard's io_uring file table instead of the process's fd "
                   "table: auto (where the kernel has every piece), on (refuse to start "
                   "without) or off")
        ->check(CLI::IsMember({"auto", "on", "off"}))
        ->capture_default_str();
    app.add_option("--copy-buffers", flags.copy_buffers,
                   "copy-path buffers per shard, a power of two; a copying direction "
                   "holds at most two, and none while idle")
        ->check(CLI::Range(1u, 32768u))
        ->capture_default_str();
    app.add_option("--copy-buffer-size", flags.copy_buffer_size,
                   "size of each copy-path buffer in bytes (1024..16777216)")
        ->check(CLI::Range(std::size_t{1024}, std::size_t{16} << 20))
        ->capture_default_str();
    app.add_option("--bulk-buffers", flags.bulk_buffers,
                   "data path copy: large buffers per shard for bulk directions, 0 or a "
                   "power of two up to 16 (0 = bulk directions keep the copy buffers)")
        ->check(CLI::IsMember({0u, 1u, 2u, 4u, 8u, 16u}))
        ->capture_default_str();
    app.add_option("--bulk-buffer-size", flags.bulk_buffer_size,
                   "size of each bulk buffer in bytes (4096..16777216)")
        ->check(CLI::Range(std::size_t{4096}, std::size_t{16} << 20))
        ->capture_default_str();
    add_duration(app, "--busy-poll", flags.busy_poll,
                 "low-latency mode: poll for up to this long before sleeping (50us, 1ms; at "
                 "most 1s); costs CPU; 0 = off",
                 kBusyPoll);
    add_duration(app, "--bulk-coalesce", flags.bulk_coalesce,
                 "inline splices: a bulk direction that woke for less than half a pipe "
                 "splices again after this long (500us; at most 100ms), with the shard's "
                 "other such directions, instead of at the next byte; 0 = off",
                 kBulkCoalesce);
    add_duration(app, "--bulk-park", flags.bulk_park,
                 "experimental: a bulk direction's splice waits in the kernel for data up to "
                 "this long (20ms; at most 1s) instead of being gated by a poll; 0 = off",
                 kBulkPark);
    add_duration(app, "--drain-timeout", flags.drain_timeout,
                 "on SIGTERM/SIGINT, let open connections finish this long (at most 24h); a "
                 "second signal resets them at once",
                 kDrainTimeout);
    app.add_option("--metrics", flags.metrics,
                   "serve Prometheus metrics at http://ADDR/metrics, e.g. 127.0.0.1:9100 "
                   "(default: not served)");
    app.add_option("--access-log", flags.access_log,
                   "one line per closed connection to this file (reopened on SIGUSR2, for "
                   "logrotate) or - for stderr (default: off)");
    app.add_option("--access-log-format", flags.access_log_format,
                   "the access log's lines: text (key=value) or json (JSON Lines)")
        ->check(CLI::IsMember({"text", "json"}))
        ->capture_default_str();
    app.add_option("--upgrade-socket", flags.upgrade_socket,
                   "binary upgrade without refusing a connection: a process started with the "
                   "same PATH while one runs takes over its listening sockets, and the old "
                   "one drains; SIGRTMIN+1 makes the running process start its successor "
                   "(the binary now at its path, same arguments)")
        ->type_name("PATH");
    control::add_control_flag(app, flags.control);
    app.footer("A DURATION is a whole number and a unit, as in the configuration file: 250ms, "
               "2s, 5m, 1h (and 50us for --busy-poll), or 0; a number without a unit is "
               "refused.\n"
               "With --config, the engine flags above (--shards, --cpus, --data-path, ...) "
               "override the file's [engine] values; --cpus and --numa-node replace its cpus "
               "and numa_nodes together.\n"
               "uring-fwd ctl [--control PATH] COMMAND... sends one command to a running "
               "process's control socket and prints the reply (uring-fwd ctl --help).");
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
    if (app.count("--trusted-sources") > 0) {
        std::string_view rest = flags.trusted_sources;
        while (!rest.empty()) {
            std::size_t comma = rest.find(',');
            std::string one(rest.substr(0, comma));
            rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
            if (const std::string error = cidr_problem(one); !error.empty())
                fail(fmt::format("--trusted-sources: {}: {}", one, error));
            route.trusted_sources.push_back(one);
        }
    }
    config.routes = {route};
    apply_engine_flags(app, flags, config);
    return config;
}

void apply_flags_over_file(const CLI::App& app, const Flags& flags, EngineConfig& config) {
    for (const RouteFlag& route_flag : kRouteFlags)
        if (app.count(route_flag.flag) > 0)
            fail(fmt::format("{} is a route setting: with --config, use {} in the route's "
                             "[[route]] section",
                             route_flag.flag, route_flag.in_file));
    apply_engine_flags(app, flags, config);
}

void apply_operation_flags(const CLI::App& app, const Flags& flags, OperationsConfig& operations) {
    if (app.count("--metrics") > 0) {
        if (flags.metrics.empty()) {
            operations.metrics.reset();
        } else {
            Endpoint address = parse_endpoint("--metrics", flags.metrics);
            if (address.is_unix())
                fail("--metrics: it must be a TCP address (HOST:PORT), not a Unix socket");
            operations.metrics = address;
        }
    }
    if (app.count("--access-log") > 0)
        operations.access_log = flags.access_log;
    if (app.count("--access-log-format") > 0)
        operations.access_log_format = *parse_access_log_format(flags.access_log_format);
    if (app.count("--upgrade-socket") > 0) {
        // The file's rule (engine_section.cpp), so one path is good or bad in both.
        if (!is_upgrade_socket_path(flags.upgrade_socket))
            fail(fmt::format("--upgrade-socket must be {}, not {}", kUpgradeSocketPath,
                             quote_input(flags.upgrade_socket)));
        operations.upgrade_socket = flags.upgrade_socket;
    }
    control::apply_control_flag(app, flags.control, operations);
}

} // namespace uringfwd::cli
