// Runs a short helper command (ip, tc) to completion with a time bound and captures
// what it printed, so namespace set-up failures are reported with the tool's own words.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace uringfwd::test {

struct CommandResult {
    int status = -1;    // exit code; -1 if it could not run, timed out or was killed
    std::string output; // stdout and stderr together
    bool ok() const { return status == 0; }
};

// `argv[0]` is looked up in PATH. A command still running after `timeout` is killed.
CommandResult run_command(const std::vector<std::string>& argv,
                          std::chrono::milliseconds timeout = std::chrono::milliseconds{10000});

// "ip netns add x": for failure messages.
std::string join_command(const std::vector<std::string>& argv);

} // namespace uringfwd::test
