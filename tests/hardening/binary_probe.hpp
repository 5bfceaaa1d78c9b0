// What a running uring-fwd binary looks like from outside: its counters (asked for with
// SIGUSR1, read back from the "... uring-fwd: total: k=v ..." line on stderr), its CPU time
// and the kinds of fds it holds, all from /proc.
#pragma once

#include "tests/support/binary_process.hpp"
#include "tests/support/deadline.hpp"

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace uringfwd::test {

using Counters = std::map<std::string, uint64_t>;

// Sends SIGUSR1 and waits for the next total line; nullopt on timeout.
std::optional<Counters> request_totals(BinaryProcess& process, const Deadline& deadline);

// One shard's counters from the "uring-fwd: shard N cpu C node X: k=v ..." lines that
// SIGUSR1 prints before the total line.
struct ShardCounters {
    int shard = -1;
    int cpu = -1;
    Counters counters;
};
// Sends SIGUSR1 and waits for the report; the shard lines of the newest one, or
// nullopt on timeout.
std::optional<std::vector<ShardCounters>> request_shard_counters(BinaryProcess& process,
                                                                 const Deadline& deadline);

// "k=v k=v" -> map (words without '=' are skipped).
Counters parse_counters(const std::string& line);

// utime + stime of `pid` (all threads) in seconds; negative if unreadable.
double cpu_seconds(pid_t pid);
// fds of `pid` that are pipes (/proc/PID/fd/* -> "pipe:[...]"); -1 if unreadable.
int count_pipe_fds(pid_t pid);
// Whether `pid` still exists and is not a zombie.
bool process_alive(pid_t pid);

// How many times `needle` occurs in `text`.
std::size_t count_occurrences(const std::string& text, const std::string& needle);

} // namespace uringfwd::test
