// Tests with a thousand connections need a few thousand fds (clients, peers and the
// proxy's two sockets per connection); they raise the soft limit themselves rather than
// every test running with a raised one.
#pragma once

#include <cstdint>

namespace uringfwd::test {

// Raises RLIMIT_NOFILE's soft limit to the hard limit; returns the soft limit now in
// force. Children spawned afterwards (the binary) inherit it.
uint64_t raise_fd_limit();

// Raises RLIMIT_NOFILE, soft and hard, to at least `want` (raising the hard limit needs
// CAP_SYS_RESOURCE and stays under /proc/sys/fs/nr_open, setrlimit(2)); never lowers
// either. Returns the soft limit now in force, which is below `want` when not permitted.
uint64_t raise_fd_limit_to(uint64_t want);

} // namespace uringfwd::test
