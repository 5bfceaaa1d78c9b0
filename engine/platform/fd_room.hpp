// How many connections the file descriptor limit leaves room for, as HAProxy derives
// maxconn from it: every connection on plain fds holds two (client and upstream), every
// pipe two, and the rest of the process (its rings, eventfds, listeners, health checks,
// metrics server, upgrade socket) a few. The engine enforces the result as a limit of
// its own beside the routes' max_connections, so clients beyond it wait in the listen
// backlog instead of being accepted and then reset when their upstream socket cannot
// be had. Pure logic.
#pragma once

#include <cstddef>
#include <cstdint>

namespace uringfwd::engine {

struct FdRoomInput {
    uint64_t fd_limit = 0;          // the soft RLIMIT_NOFILE
    uint64_t open_fds = 0;          // open before the shards start (stdio, logs, sockets)
    std::size_t shards = 1;         // each with a ring fd, an eventfd and its listeners
    std::size_t listeners = 0;      // listen addresses: one socket each per shard
    std::size_t health_targets = 0; // members with an active check (a socket each)
    std::size_t max_pipes = 0;      // per shard, as configured
    bool uses_pipes = true;         // false: data path copy, which splices nothing
};

// The copy path splices nothing, but a connection leaving its shard (an upgrade's
// hand-over, a move) with copy chunks its destination has not taken puts them into a
// pipe to take along (docs/handover.md): that many per shard.
inline constexpr std::size_t kCopyPathPipes = 2;

struct FdRoom {
    // Connections that may hold plain fds at once, all shards together (two each).
    std::size_t connections = 0;
    // Pipes per shard at most: max_pipes, or fewer when the fds are short (pipes get a
    // fifth of the room at most, one per shard at least: a direction that finds none
    // waits for one).
    std::size_t pipes_per_shard = 0;
    // Fds kept for everything else.
    uint64_t reserved = 0;
};

// Fds kept beside what FdRoomInput counts: the metrics server and its clients, the
// upgrade socket and a successor's connection, name lookups, an access log reopened.
inline constexpr uint64_t kSpareFds = 16;

FdRoom fd_room(const FdRoomInput& in);

// Connections per shard a registered file table of `slots` leaves room for (two slots
// each): one accept per listener of the shard may be in flight when the table fills,
// and each of those clients needs a slot for its upstream too.
std::size_t slot_room(std::size_t slots, std::size_t direct_listeners);

} // namespace uringfwd::engine
