// The connections the fd limit leaves room for (platform/fd_room.hpp), worked out once
// at start before any shard runs: what the shards enforce beside the routes' limits, the
// pipes each may have, and what the start line and the warnings tell the operator.
#include "api/engine_impl.hpp"

#include "platform/fd_room.hpp"

#include <dirent.h>
#include <sys/resource.h>

#include <fmt/format.h>

namespace uringfwd {

namespace {

// Entries of /proc/self/fd, less the one the listing itself holds.
uint64_t count_open_fds() {
    DIR* dir = ::opendir("/proc/self/fd");
    if (dir == nullptr)
        return 0;
    uint64_t n = 0;
    while (dirent* entry = ::readdir(dir))
        if (entry->d_name[0] != '.')
            ++n;
    ::closedir(dir);
    return n > 0 ? n - 1 : 0;
}

} // namespace

void Engine::Impl::plan_fd_room(std::size_t shards) {
    rlimit lim{};
    ::getrlimit(RLIMIT_NOFILE, &lim);
    engine::FdRoomInput in;
    in.fd_limit = lim.rlim_cur;
    in.open_fds = count_open_fds();
    in.shards = shards;
    in.listeners = routes_->groups.size();
    for (const engine::Route& route : routes_->routes)
        if (route.pool.health_check.enabled)
            in.health_targets += route.members.size();
    in.max_pipes = config_.splice.max_pipes;
    in.uses_pipes = config_.data_path != DataPath::Copy;
    const engine::FdRoom room = engine::fd_room(in);
    room_.fd_limit = in.fd_limit;
    room_.connections = room.connections;
    room_.pipes_per_shard = room.pipes_per_shard;
    room_.reserved_fds = room.reserved;
    if (room.connections == 0)
        throw StartError(fmt::format(
            "the fd limit (RLIMIT_NOFILE {}) leaves room for no connection: {} fds are "
            "open or kept for the engine ({} shards, {} listen addresses), {} for pipes; "
            "raise it (ulimit -n, LimitNOFILE=)",
            in.fd_limit, room.reserved, shards, in.listeners, 2 * shards * room.pipes_per_shard));
    fd_connections_ = std::make_shared<engine::SharedLimit>(room.connections, shards);
}

void Engine::Impl::warn_about_fd_room() {
    if (room_.direct) {
        // Sockets live in the shards' file tables; only what is left on plain fds (a
        // wildcard listener's clients, hand-overs, pipes) counts against the fd limit.
        if (room_.connections_per_shard < 1024)
            log_.warn("each shard's registered file table leaves room for {} connections "
                      "(two slots each); more clients wait in the listen backlog; raise "
                      "[engine] direct_table_size or the fd limit (RLIMIT_NOFILE {})",
                      room_.connections_per_shard, room_.fd_limit);
        return;
    }
    std::size_t largest_route_limit = 0;
    for (const engine::Route& route : routes_->routes)
        largest_route_limit = std::max(largest_route_limit, route.max_connections);
    if (room_.connections < 1024 || room_.connections < largest_route_limit)
        log_.warn(
            "the fd limit (RLIMIT_NOFILE {}) leaves room for {} connections (two fds "
            "each; pipes per shard: {}; fds for the rest: {}){}; more clients wait in "
            "the listen backlog; raise it (ulimit -n, LimitNOFILE=)",
            room_.fd_limit, room_.connections, room_.pipes_per_shard, room_.reserved_fds,
            room_.connections < largest_route_limit
                ? fmt::format(", fewer than a route's max_connections ({})", largest_route_limit)
                : std::string());
}

} // namespace uringfwd
