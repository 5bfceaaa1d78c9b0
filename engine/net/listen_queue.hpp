// How many clients wait in a listening socket's accept queue (connected, not yet
// accepted): the clients a route at its limit keeps in the backlog, which its waiting
// gauge counts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace uringfwd::engine {

// The accept queue's length for a TCP listening socket; nullopt for anything else
// (a Unix socket's queue is not told by getsockopt or ioctl: unix_inq_len() answers
// -EINVAL for a listener, net/unix/af_unix.c).
std::optional<std::size_t> accept_queue_length(int listen_fd);

// The socket's inode number (fstat), which names it across dup()s and processes: two
// shards accepting on one socket see one queue. 0 when unknown.
uint64_t socket_inode(int fd);

} // namespace uringfwd::engine
