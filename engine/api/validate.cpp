// validate(const EngineConfig&): what Engine::start() refuses before anything is bound.
#include "api/route_checks.hpp"
#include "uringfwd/config.hpp"

#include <algorithm>

#include <fmt/format.h>

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
    if (config.copy_buffers > 32768 || !power_of_two(config.copy_buffers))
        problems.push_back(
            fmt::format("copy_buffers must be a power of two between 1 and 32768, not {}",
                        config.copy_buffers));
    if (config.copy_buffer_size == 0 || config.copy_buffer_size > (std::size_t{1} << 30))
        problems.push_back(fmt::format("copy_buffer_size must be between 1 byte and 1 GiB, not {}",
                                       config.copy_buffer_size));
    if (config.bulk_buffers > 16 ||
        (config.bulk_buffers != 0 && !power_of_two(config.bulk_buffers)))
        problems.push_back(
            fmt::format("bulk_buffers must be 0 or a power of two between 1 and 16, not {}",
                        config.bulk_buffers));
    if (config.bulk_buffers != 0 &&
        (config.bulk_buffer_size < 4096 || config.bulk_buffer_size > (std::size_t{16} << 20)))
        problems.push_back(
            fmt::format("bulk_buffer_size must be between 4096 bytes and 16 MiB, not {}",
                        config.bulk_buffer_size));
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
    check_copy_buffers(config, problems);
    for (const RouteConfig& route : config.routes)
        if (std::string problem = slow_start_problem(route); !problem.empty())
            problems.push_back(fmt::format("route \"{}\": {}", route.name, problem));
    return problems;
}

} // namespace uringfwd
