#include "platform/fd_room.hpp"

#include <algorithm>

namespace uringfwd::engine {

FdRoom fd_room(const FdRoomInput& in) {
    FdRoom room;
    const uint64_t shards = std::max<std::size_t>(in.shards, 1);
    // Per shard: its ring, its eventfd and one socket per listen address.
    room.reserved = in.open_fds + shards * (2 + in.listeners) + in.health_targets +
                    (in.health_targets > 0 ? 2 : 0) + kSpareFds;
    const uint64_t free = in.fd_limit > room.reserved ? in.fd_limit - room.reserved : 0;
    const uint64_t most_pipes =
        in.uses_pipes ? in.max_pipes : std::min<uint64_t>(in.max_pipes, kCopyPathPipes);
    if (most_pipes > 0) {
        const uint64_t fifth = free / (5 * 2 * shards); // pipes per shard in a fifth
        room.pipes_per_shard = static_cast<std::size_t>(std::clamp<uint64_t>(fifth, 1, most_pipes));
    }
    const uint64_t pipe_fds = 2 * shards * room.pipes_per_shard;
    room.connections = free > pipe_fds ? static_cast<std::size_t>((free - pipe_fds) / 2) : 0;
    return room;
}

std::size_t slot_room(std::size_t slots, std::size_t direct_listeners) {
    const std::size_t overshoot = direct_listeners > 1 ? direct_listeners - 1 : 0;
    const std::size_t connections = slots / 2;
    return connections > overshoot ? connections - overshoot : 0;
}

} // namespace uringfwd::engine
