// EngineInfo as text: the start-up line's words (Engine::describe(), the binary's
// "serving: ..." and its version line), built from the structure alone.
#include "support/plural.hpp"
#include "uringfwd/engine.hpp"

#include <map>

#include <fmt/format.h>

namespace uringfwd {

std::string describe_routes(const std::vector<RouteInfo>& routes) {
    std::string out;
    for (const RouteInfo& route : routes) {
        std::string listen;
        for (const Endpoint& e : route.listen)
            listen += fmt::format("{}{}", listen.empty() ? "" : " ", e.to_string());
        std::string members;
        for (const std::string& m : route.members)
            members += fmt::format("{}{}", members.empty() ? "" : " ", m);
        out += fmt::format("{}listening on {}, forwarding to {}", out.empty() ? "" : "; ", listen,
                           members);
        if (routes.size() > 1 || route.members.size() > 1)
            out += fmt::format(" (route {}, {})", route.name, to_string(route.balance));
    }
    return out;
}

std::string describe_serving(const EngineInfo& info) {
    // "listening on A, forwarding to B" first: scripts and tests read that part.
    std::string out = describe_routes(info.routes);
    std::map<int, int> per_node;
    for (const ShardInfo& shard : info.shards)
        ++per_node[shard.node];
    std::string nodes;
    for (auto [node, count] : per_node)
        nodes += fmt::format("{}{}: {}", nodes.empty() ? "" : ", ",
                             node < 0 ? "node ?" : fmt::format("node {}", node), count);
    out += fmt::format("; {} ({})", engine::count_of(info.shards.size(), "shard"), nodes);
    return out;
}

std::string describe(const ShardInfo& shard) {
    std::string buffers;
    if (shard.copy_buffers != 0)
        buffers = fmt::format(", {} copy buffers of {} bytes", shard.copy_buffers,
                              shard.copy_buffer_size);
    if (shard.bulk_buffers != 0)
        buffers += fmt::format(", {} bulk buffers of {} bytes", shard.bulk_buffers,
                               shard.bulk_buffer_size);
    std::string busy_poll = shard.busy_poll.count() > 0
                                ? fmt::format(", busy-poll {} us", shard.busy_poll.count())
                                : std::string();
    return fmt::format(
        "cpu {}, data path {}, splices {}, pipes {} bytes (at most {}){}, steering {}{}, {}{}",
        shard.cpu, to_string(shard.data_path), shard.inline_splice ? "inline" : "ring",
        shard.pipe_size, shard.max_pipes, buffers, shard.steering, busy_poll, shard.ring_features,
        shard.direct_descriptors ? fmt::format(" direct-descriptors={}", shard.direct_slots)
                                 : std::string());
}

} // namespace uringfwd
