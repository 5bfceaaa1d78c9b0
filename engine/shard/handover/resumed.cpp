#include "shard/handover/resumed.hpp"

#include <fcntl.h>

namespace uringfwd::engine {

namespace {

std::optional<pipes::Pipe> pipe_of(const UnsentPipe& unsent) {
    if (unsent.read_fd < 0)
        return std::nullopt;
    // Its capacity is the kernel's, whatever the pool it came from asked for; a pipe
    // holds what it holds in any case, and is never filled again before it is empty.
    const int capacity = ::fcntl(unsent.write_fd, F_GETPIPE_SZ);
    pipes::Pipe pipe(unsent.read_fd, unsent.write_fd,
                     capacity > 0 ? static_cast<std::size_t>(capacity) : unsent.bytes);
    pipe.filled(unsent.bytes);
    return pipe;
}

} // namespace

Resumed resumed_from(DetachedConnection& conn) {
    Resumed out{.member = conn.member,
                .bytes = {conn.bytes_to_upstream, conn.bytes_to_client},
                .opened_at = conn.opened_at,
                .connected_at = conn.connected_at};
    for (Toward toward : {Toward::Upstream, Toward::Client})
        out.unsent[static_cast<int>(toward)] = pipe_of(conn.take_unsent(toward));
    return out;
}

} // namespace uringfwd::engine
