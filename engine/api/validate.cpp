// validate(const EngineConfig&): what Engine::start() refuses before anything is bound,
// every problem at once; route_problems(), its routes' part, is what reconfigure()
// refuses. Only what the configuration says is checked here: what the machine has
// (CPUs, addresses, users, the kernel's features) start() finds out.
#include "api/validate.hpp"

#include "api/route_checks.hpp"
#include "net/socket_controls.hpp"
#include "uringfwd/route.hpp"

#include <algorithm>

#include <fmt/format.h>

#include <cstdint>
#include <set>
#include <string_view>
#include <utility>

namespace uringfwd {

namespace {

bool power_of_two(unsigned n) {
    return n != 0 && (n & (n - 1)) == 0;
}

// The kernel takes a provided-buffer ring of a power-of-two size up to 32768 entries,
// each buffer's length a 32-bit value.
void check_copy_buffers(const EngineConfig& config, std::vector<std::string>& problems) {
    if (config.data_path == DataPath::Splice)
        return;
    const EngineConfig::Copy& copy = config.copy;
    if (copy.copy_buffers > 32768 || !power_of_two(copy.copy_buffers))
        problems.push_back(fmt::format(
            "copy_buffers must be a power of two between 1 and 32768, not {}", copy.copy_buffers));
    if (copy.copy_buffer_size == 0 || copy.copy_buffer_size > (std::size_t{1} << 30))
        problems.push_back(fmt::format("copy_buffer_size must be between 1 byte and 1 GiB, not {}",
                                       copy.copy_buffer_size));
    if (copy.bulk_buffers > 16 || (copy.bulk_buffers != 0 && !power_of_two(copy.bulk_buffers)))
        problems.push_back(
            fmt::format("bulk_buffers must be 0 or a power of two between 1 and 16, not {}",
                        copy.bulk_buffers));
    if (copy.bulk_buffers != 0 &&
        (copy.bulk_buffer_size < 4096 || copy.bulk_buffer_size > (std::size_t{16} << 20)))
        problems.push_back(
            fmt::format("bulk_buffer_size must be between 4096 bytes and 16 MiB, not {}",
                        copy.bulk_buffer_size));
}

// A parked source is made blocking with fcntl(2) (bulk_park, docs/kernel.md §1.8): an
// inline splice(2) from or into it on the shard's thread could wait, and a socket in a
// slot of the ring's file table has no fd for fcntl.
void check_bulk_park(const EngineConfig& config, std::vector<std::string>& problems) {
    if (config.experimental.bulk_park.count() <= 0)
        return;
    if (config.splice.splice_mechanism == SpliceMechanism::Inline)
        problems.push_back("splice_mechanism = \"inline\" cannot be had with bulk_park: a parked "
                           "socket is blocking, and an inline splice must never wait; use "
                           "\"ring\" or \"auto\"");
    if (config.ring.direct_descriptors == DirectDescriptors::On)
        problems.push_back("direct_descriptors = \"on\" cannot be had with bulk_park: bulk_park "
                           "needs plain fds (it toggles O_NONBLOCK with fcntl)");
}

// Only a socket file has permissions to set: not a TCP address, nor an abstract name.
bool has_socket_file(const Endpoint& e) {
    return e.is_unix() && !e.host.empty() && e.host.front() != '@';
}

// allow and deny of a route or of the engine: every entry a CIDR range.
template <typename Problem>
void check_access_lists(const std::vector<std::string>& allow, const std::vector<std::string>& deny,
                        const Problem& problem) {
    for (const auto& [name, list] : {std::pair{"allow", &allow}, std::pair{"deny", &deny}})
        for (const std::string& text : *list)
            if (const std::string error = cidr_problem(text); !error.empty())
                problem(fmt::format("{}: {}: {}", name, text, error));
}

// The per-source limits (routing/source_limits.hpp counts them in 32 bits).
template <typename Problem>
void check_source_limits(const RouteConfig& rc, const Problem& problem) {
    if (rc.max_connections_per_source > UINT32_MAX)
        problem(fmt::format("max_connections_per_source must be at most {}, not {}", UINT32_MAX,
                            rc.max_connections_per_source));
    if (rc.connection_burst_per_source != 0 && rc.connection_rate_per_source == 0)
        problem("connection_burst_per_source needs connection_rate_per_source (a burst of a "
                "rate that is not limited)");
    if (rc.source_prefix_v4 < 1 || rc.source_prefix_v4 > 32)
        problem(fmt::format("source_prefix_v4 must be 1..32, not {}", rc.source_prefix_v4));
    if (rc.source_prefix_v6 < 1 || rc.source_prefix_v6 > 128)
        problem(fmt::format("source_prefix_v6 must be 1..128, not {}", rc.source_prefix_v6));
}

void check_route(const RouteConfig& rc, std::vector<std::string>& problems) {
    const auto problem = [&](const std::string& what) {
        problems.push_back(fmt::format("route \"{}\": {}", rc.name, what));
    };
    if (rc.listen.empty())
        problem("no listen address");
    if (rc.pool.members.empty())
        problem("no upstream");
    for (const std::string& text : rc.trusted_sources)
        if (const std::string error = cidr_problem(text); !error.empty())
            problem(fmt::format("trusted_sources: {}: {}", text, error));
    for (std::size_t i = 0; i < rc.listen.size() && i < rc.listen_access.size(); ++i) {
        const UnixSocketAccess& access = rc.listen_access[i];
        const std::string listen = rc.listen[i].to_string();
        if (!access.empty() && !has_socket_file(rc.listen[i]))
            problem(
                fmt::format("listen {}: mode, user and group are for unix: paths only", listen));
        else if (access.mode && *access.mode > 0777)
            problem(
                fmt::format("listen {}: mode {:04o} is more than permission bits (at most 0777)",
                            listen, *access.mode));
    }
    if (const std::string ramp = slow_start_problem(rc); !ramp.empty())
        problem(ramp);
    if (rc.max_duration.count() < 0)
        problem("max_duration must not be negative (0: no limit)");
    check_access_lists(rc.allow, rc.deny, problem);
    check_source_limits(rc, problem);
    for (const std::string& control : engine::socket_control_problems(rc))
        problem(control);
    // One series per member label in the metrics (RouteStats): two alike would be two
    // samples of one series.
    std::set<std::string> labels;
    for (const UpstreamMember& m : rc.pool.members) {
        std::string label = m.name.empty() ? m.address.to_string() : m.name;
        if (!labels.insert(label).second)
            problem(fmt::format(
                "upstream {} is listed twice{}", label,
                m.name.empty() ? "; give each a name to connect to one address twice" : ""));
    }
}

} // namespace

std::string slow_start_problem(const RouteConfig& route) {
    if (route.pool.balance != BalancePolicy::Maglev)
        return {};
    const bool members_ramp = std::any_of(
        route.pool.members.begin(), route.pool.members.end(),
        [](const UpstreamMember& m) { return m.slow_start && m.slow_start->count() > 0; });
    return route.slow_start.count() > 0 || members_ramp ? std::string(kMaglevSlowStart)
                                                        : std::string();
}

namespace engine {

std::vector<std::string> route_problems(const EngineConfig& config) {
    // The single-route shorthand makes a route of one listen address and one member,
    // which none of these checks can refuse.
    std::vector<std::string> problems;
    // Routes are known by name (metrics labels, update_pool(), the access log): a second
    // route of one name would be unreachable by it.
    std::set<std::string_view> names;
    for (const RouteConfig& route : config.routes) {
        if (!names.insert(route.name).second)
            problems.push_back(fmt::format("route \"{}\" is defined twice", route.name));
        check_route(route, problems);
    }
    // The routes' default lists: a reload applies them too (build_route_table()).
    check_access_lists(config.access.allow, config.access.deny, [&](const std::string& what) {
        problems.push_back(fmt::format("[engine] {}", what));
    });
    return problems;
}

} // namespace engine

std::vector<std::string> validate(const EngineConfig& config) {
    std::vector<std::string> problems;
    // Routes replace the single-route shorthand; a listen or upstream beside them would
    // be ignored, so it is refused.
    if (!config.routes.empty()) {
        if (config.listen != Endpoint{})
            problems.push_back(
                fmt::format("listen ({}) cannot be had with routes: give each route its own "
                            "listen addresses",
                            config.listen.to_string()));
        if (config.upstream != Endpoint{})
            problems.push_back(
                fmt::format("upstream ({}) cannot be had with routes: give each route's pool "
                            "its members",
                            config.upstream.to_string()));
    }
    for (std::string& problem : engine::route_problems(config))
        problems.push_back(std::move(problem));
    if (config.access.source_table_size < EngineConfig::Access::kMinSourceTableSize ||
        config.access.source_table_size > EngineConfig::Access::kMaxSourceTableSize)
        problems.push_back(fmt::format(
            "source_table_size must be {}..{}, not {}", EngineConfig::Access::kMinSourceTableSize,
            EngineConfig::Access::kMaxSourceTableSize, config.access.source_table_size));
    check_bulk_park(config, problems);
    check_copy_buffers(config, problems);
    return problems;
}

} // namespace uringfwd
