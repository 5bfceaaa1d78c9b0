// Reads what /proc says about a process: how many fds it holds, how much memory is
// resident, and how many io_uring worker threads it has. pid 0 means this process.
#pragma once

#include "tests/support/deadline.hpp"
// eventually(), with which the counts here are usually awaited.
#include "tests/support/eventually.hpp"

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace uringfwd::test {

// Entries in /proc/PID/fd; -1 if unreadable.
int count_open_fds(pid_t pid = 0);
// VmRSS in bytes; 0 if unreadable.
uint64_t resident_bytes(pid_t pid = 0);
// Threads in /proc/PID/task whose comm starts with `prefix` (e.g. "iou-wrk").
int count_threads_with_prefix(pid_t pid, std::string_view prefix);
// The same threads counted by their whole comm: io_uring names a ring's io-wq workers
// "iou-wrk-<tid of the thread that owns the ring>" (io_uring/io-wq.c, io_wq_worker()),
// so with prefix "iou-wrk-" this gives the workers of each shard thread.
std::map<std::string, int> threads_by_comm(pid_t pid, std::string_view prefix);

} // namespace uringfwd::test
