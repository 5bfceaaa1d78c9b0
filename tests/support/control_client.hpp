// Talking to the binary's control socket in tests: a raw client (one connection, any
// bytes, the reply up to its empty line) and `uring-fwd ctl` run as a child process.
#pragma once

#include "tests/support/binary_process.hpp"
#include "tests/support/deadline.hpp"
#include "tests/support/unique_fd.hpp"

#include <optional>
#include <string>
#include <vector>

namespace uringfwd::test {

// A connected Unix stream socket to `path`; invalid (errno set) when connect(2) failed.
UniqueFd connect_unix(const std::string& path);

// Reads one reply: everything up to and including the empty line that ends it, which is
// left off. nullopt when the connection ends or the deadline passes first.
std::optional<std::string> read_reply(int fd, const Deadline& deadline);

// Sends `line` and a newline on `fd`, then read_reply().
std::optional<std::string> request(int fd, const std::string& line, const Deadline& deadline);

// One command over a connection of its own; throws std::runtime_error when no reply came.
std::string control_command(const std::string& path, const std::string& line);

struct CtlRun {
    ExitStatus status;
    std::string out;
    std::string err;
};
// `uring-fwd ctl ARGS...`, waited for (at most 10 s; throws if it does not end).
CtlRun run_ctl(std::vector<std::string> args);

} // namespace uringfwd::test
