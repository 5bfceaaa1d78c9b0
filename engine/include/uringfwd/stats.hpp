// Counters an Engine exposes; a snapshot, summed over shards.
#pragma once

#include <cstdint>
#include <string>

namespace uringfwd {

struct EngineStats {
    uint64_t accepted = 0;          // client connections accepted
    uint64_t active = 0;            // connections open now
    uint64_t upstream_failures = 0; // refused, unreachable or timed out
    uint64_t bytes_to_upstream = 0; // client -> upstream
    uint64_t bytes_to_client = 0;   // upstream -> client
    uint64_t splices = 0;           // splice operations completed
    uint64_t short_splices = 0;     // pipe->socket splices that moved less than the pipe held
    uint64_t eagains = 0;           // splices that returned -EAGAIN
    uint64_t enters = 0;            // io_uring_enter calls that waited for completions
    uint64_t completions = 0;       // CQEs reaped
    uint64_t pipes_created = 0;
    uint64_t pipes_leased = 0;       // leased now
    uint64_t pipes_closed_dirty = 0; // closed because they still held bytes
    uint64_t pipe_size_reductions = 0;
    uint64_t pipe_waits = 0;         // times a direction had to wait for a pipe
    uint64_t accept_backoffs = 0;    // accept paused for lack of file descriptors
    uint64_t copy_receives = 0;      // copy path: receives that brought bytes
    uint64_t copy_sends = 0;         // copy path: sends completed
    uint64_t buffers_out = 0;        // copy buffers held now (received, not all sent)
    uint64_t buffer_waits = 0;       // receives that found every copy buffer out
    uint64_t switches_to_splice = 0; // directions that turned bulk (DataPath::Auto)
    uint64_t switches_to_copy = 0;   // directions that turned small again
    uint64_t iowq_threads = 0;       // io-wq kernel workers serving the shard(s) now

    EngineStats& operator+=(const EngineStats& other);

    // "accepted=… active=… …": one line for logs and SIGUSR1 reports.
    std::string to_line() const;

    double completions_per_enter() const {
        return enters == 0 ? 0.0 : static_cast<double>(completions) / static_cast<double>(enters);
    }
};

struct ShardStats {
    int shard = 0;
    int cpu = -1;  // the CPU the shard is pinned to
    int node = -1; // its NUMA node, -1 if unknown
    EngineStats counters;
};

} // namespace uringfwd
