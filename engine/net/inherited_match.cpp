#include "net/inherited_match.hpp"

#include "support/plural.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace uringfwd::engine {

InheritedPlan match_inherited(const std::vector<Endpoint>& listen,
                              const std::vector<InheritedSocket>& sockets) {
    InheritedPlan plan;
    plan.per_listener.resize(listen.size());
    std::vector<uint64_t> seen;
    for (const InheritedSocket& socket : sockets) {
        const auto it = std::find(listen.begin(), listen.end(), socket.address);
        if (it == listen.end()) {
            plan.unmatched.push_back(socket);
            continue;
        }
        // The same socket twice (a dup, or one shared socket sent once per shard by a
        // process that shared it itself): one socket, whatever the number of fds.
        if (std::find(seen.begin(), seen.end(), socket.identity) != seen.end())
            continue;
        seen.push_back(socket.identity);
        plan.per_listener[static_cast<std::size_t>(it - listen.begin())].push_back(socket.fd);
    }
    return plan;
}

int inherited_for_shard(const std::vector<int>& fds, std::size_t shard, std::size_t shards,
                        const Endpoint& address) {
    if (fds.empty())
        return -1;
    if (fds.size() == 1)
        return fds.front();
    if (fds.size() == shards)
        return fds[shard];
    throw std::invalid_argument(
        fmt::format("{} for {}, but {}: need one, or one per shard (start with --shards {})",
                    count_of(fds.size(), "inherited listening socket"), address.to_string(),
                    count_of(shards, "shard"), fds.size()));
}

} // namespace uringfwd::engine
