// A shard's pool of pipes: leased to a direction while it moves data, returned when
// the direction goes idle, reused only when empty.
#pragma once

#include "pipes/pipe.hpp"
#include "pipes/size_policy.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace uringfwd::pipes {

struct PoolCounters {
    uint64_t created = 0;
    uint64_t leased_now = 0;
    uint64_t closed_dirty = 0;    // returned holding bytes: closed, never reused
    uint64_t size_reductions = 0; // times the kernel made us ask for less
    uint64_t create_failures = 0; // pipe2() failed (fd or pipe budget exhausted)
};

// Not thread-safe: one pool per shard, used only by that shard's thread.
class PipePool {
public:
    // max_pipes bounds idle + leased pipes. wanted_size 0 = fs.pipe-max-size.
    PipePool(std::size_t max_pipes, std::size_t wanted_size);

    // An empty pipe, or nullopt when max_pipes are leased or the kernel would not give
    // us another pipe right now; the caller waits and asks again after a give_back().
    std::optional<Pipe> lease();

    enum class Check {
        Counter,   // trust the pipe's byte counter
        AskKernel, // also ask the kernel (one syscall): for pipes of aborted streams
    };

    // Takes a pipe back. An empty pipe is kept for the next lease; one that still
    // holds bytes is closed, so no byte of one stream can ever reach another.
    void give_back(Pipe pipe, Check check = Check::Counter);

    // A leased pipe leaves the pool with its bytes (its connection moves to another
    // shard or process, docs/handover.md): no longer counted as leased, not closed.
    Pipe let_go(Pipe pipe);
    // A pipe that came from elsewhere with its bytes (let_go() of another pool): counted
    // as leased from now on, and given back as any leased one. It may exceed max_pipes
    // for as long as it is out: it holds bytes that must be delivered.
    void adopt() { ++counters_.leased_now; }

    // The size new pipes are asked to have.
    std::size_t pipe_size() const { return policy_.wanted(); }
    std::size_t max_pipes() const { return max_pipes_; }
    std::size_t idle() const { return idle_.size(); }
    const PoolCounters& counters() const { return counters_; }

    // Messages worth one log line each, such as the first size reduction; emptied by
    // the call.
    std::vector<std::string> take_notices();

private:
    std::optional<Pipe> create();

    std::size_t max_pipes_;
    SizePolicy policy_;
    std::vector<Pipe> idle_;
    PoolCounters counters_;
    std::vector<std::string> notices_;
    bool reported_reduction_ = false;
    bool reported_create_failure_ = false;
};

} // namespace uringfwd::pipes
