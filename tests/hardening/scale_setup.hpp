// What the scale tests (scale_test.cpp) share: the conditions they need, the engine
// binary started under a hard RLIMIT_NOFILE of its own, and what /proc says about it.
//
// The budget is the engine's alone: the clients live in the test process (its own
// limit raised far above), the echo upstream in a forked child, so nothing but the
// engine's own descriptors counts against the engine's 20 000.
#pragma once

#include "tests/support/binary_process.hpp"
#include "tests/support/sockets.hpp"

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace uringfwd::test {

// The engine's soft and hard RLIMIT_NOFILE in the scale tests: this machine's hard
// limit, under which issue 14 found 10 000 connections on one shard impossible with
// two plain fds each.
inline constexpr uint64_t kEngineFdLimit = 20000;
// Connections each shard must hold.
inline constexpr std::size_t kConnectionsPerShard = 10000;

// Why the scale tests cannot run here, or nullopt when they can. Checks
// URING_FWD_SCALE=1, raises this process's RLIMIT_NOFILE to fit `sockets_per_process`
// (forked children inherit it), the ephemeral port range (all `clients` connect to the
// one engine address) and prlimit(1). CPUs 0..cpus-1 must be in the affinity mask (the
// tests steer clients to shards by the CPU they connect from).
std::optional<std::string> scale_skip_reason(std::size_t clients, std::size_t sockets_per_process,
                                             int cpus);

// 127.0.0.N:0 (N >= 2): an echo upstream's listener, on an address of its own. The
// engine's connects to it and the clients' connects to the engine then never compete
// for local ports: connect(2) may reuse a local port towards another destination, as
// long as the 4-tuple is unique (net/ipv4/inet_hashtables.c, __inet_hash_connect).
Listener listen_on_loopback_address(int n);

struct LimitedEngine {
    std::unique_ptr<BinaryProcess> process;
    Endpoint endpoint; // where it listens (127.0.0.1, an ephemeral port)
};

// Starts the binary through `prlimit --nofile=20000:20000` (prlimit sets its own limit
// and execs, so the engine runs in that same process with it), forwarding
// 127.0.0.1:0 to the pool `upstreams` (round-robin), with `extra` flags. Fails the test
// (ADD_FAILURE, with the binary's stderr) and returns a null process if it does not start
// listening.
LimitedEngine start_limited_engine(const std::vector<Endpoint>& upstreams,
                                   const std::vector<std::string>& extra);

// RLIMIT_NOFILE {soft, hard} of `pid` from /proc/PID/limits; {0, 0} if unreadable.
std::pair<uint64_t, uint64_t> nofile_limits(pid_t pid);

// The io-wq workers of `pid` by owner: "iou-wrk-<tid>" -> how many.
std::map<std::string, int> iowq_workers(pid_t pid);
// Whether no ring thread of `pid` has more than `per_owner` io-wq workers and at most
// `owners` threads have any. `seen` describes what was found.
bool iowq_at_most(pid_t pid, int per_owner, int owners, std::string& seen);

} // namespace uringfwd::test
