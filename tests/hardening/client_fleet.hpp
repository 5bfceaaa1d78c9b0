// Tens of thousands of client connections for the scale tests: opened non-blocking a
// batch at a time from a thread pinned to one CPU (so the engine's CPU steering sends
// them all to that CPU's shard), and proven alive by one tagged echo each, all in
// flight together under epoll rather than one round trip at a time.
#pragma once

#include "tests/support/deadline.hpp"
#include "tests/support/unique_fd.hpp"
#include "uringfwd/endpoint.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace uringfwd::test {

struct Fleet {
    std::vector<UniqueFd> fds; // established connections
    std::size_t failed = 0;    // connects that failed or did not finish in time
    // Of those, the ones reset by the peer: established, then reset before this side
    // looked (an engine that accepts and cannot serve resets at once).
    std::size_t reset = 0;
    std::string first_error; // why the first one failed, for the test's message
    double seconds = 0;      // how long opening them took
};

// Opens `count` TCP connections to the IPv4 endpoint `to`, `batch` connects in flight at
// a time, from the calling thread pinned to `cpu` for the duration (-1: not pinned; the
// thread's old mask is restored). Stops early at `deadline`, counting the rest failed.
Fleet open_fleet(const Endpoint& to, std::size_t count, int cpu, const Deadline& deadline,
                 std::size_t batch = 512);

struct EchoTally {
    std::size_t good = 0;   // the tag came back whole and unchanged
    std::size_t bad = 0;    // closed, reset, or a different tag
    std::size_t silent = 0; // nothing (or part of it) came back before the wait ended
};

// Sends an 8-byte tag (`first_tag` + index) on each of `fds`, all at once, then waits
// for every one to come back. The wait ends when all have answered, when nothing
// arrived for `quiet` (connections the engine never took stay silent), or at `deadline`.
EchoTally echo_all(const std::vector<UniqueFd>& fds, uint64_t first_tag, milliseconds quiet,
                   const Deadline& deadline);

} // namespace uringfwd::test
