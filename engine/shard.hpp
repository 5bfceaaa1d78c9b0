// A shard: one thread, one io_uring, one listener, its own connections and pipes.
// Nothing in a shard is touched by another thread except its counters (atomics the
// shard alone writes) and its wake-up eventfd.
#pragma once

#include "connection.hpp"
#include "direction_logic.hpp"
#include "logger.hpp"
#include "op_tag.hpp"
#include "pipes/pipe_pool.hpp"
#include "socket_address.hpp"
#include "uring/ring.hpp"
#include "uring/unique_fd.hpp"
#include "uringfwd/config.hpp"
#include "uringfwd/stats.hpp"

#include <atomic>
#include <chrono>
#include <deque>
#include <future>
#include <memory>
#include <string>

namespace uringfwd::engine {

// Counters written by the shard thread only (plain load + store, no locked
// instructions on the data path) and read by anyone.
struct ShardCounters {
    std::atomic<uint64_t> accepted{0};
    std::atomic<uint64_t> active{0};
    std::atomic<uint64_t> upstream_failures{0};
    std::atomic<uint64_t> bytes_to_upstream{0};
    std::atomic<uint64_t> bytes_to_client{0};
    std::atomic<uint64_t> splices{0};
    std::atomic<uint64_t> short_splices{0};
    std::atomic<uint64_t> eagains{0};
    std::atomic<uint64_t> enters{0};
    std::atomic<uint64_t> completions{0};
    std::atomic<uint64_t> pipes_created{0};
    std::atomic<uint64_t> pipes_leased{0};
    std::atomic<uint64_t> pipes_closed_dirty{0};
    std::atomic<uint64_t> pipe_size_reductions{0};
    std::atomic<uint64_t> pipe_waits{0};
    std::atomic<uint64_t> accept_backoffs{0};

    void add_to(EngineStats& total) const;
};

struct ShardSetup {
    int index = 0;
    const EngineConfig* config = nullptr;
    SocketAddress listen;
    SocketAddress upstream;
};

class Shard {
public:
    Shard(ShardSetup setup, Logger logger);
    ~Shard();

    // The thread body: sets up the ring, pipe pool and listener, reports success or
    // the failure through `ready`, then serves until stopped.
    void run(std::promise<void>& ready);

    // Thread-safe: wakes the shard and makes it stop.
    void request_stop();

    const ShardCounters& counters() const { return counters_; }
    // Valid once run() reported ready.
    SocketAddress bound_address() const { return bound_; }
    std::string describe() const { return description_; }

private:
    void setup();
    void serve();
    bool finished() const;
    void dispatch(const uring::Completion& c);
    void publish_counters();
    void log_pool_notices();

    // Listener
    void arm_accept();
    void on_accept(const uring::Completion& c);
    void on_accept_pause_over();
    void on_wake();
    void begin_stop();
    void submit_shard_op_timeout(Op op, std::chrono::milliseconds after);

    // Connection life cycle
    void on_new_client(int fd);
    void on_connection_op(const OpTag& tag, const uring::Completion& c);
    void on_connected(uint32_t slot, Connection& conn, int result);
    void abort(uint32_t slot, Connection& conn, const std::string& reason);
    void settle(uint32_t slot, Connection& conn);
    void finalize(uint32_t slot, Connection& conn);

    // Directions
    void start_reading(uint32_t slot, Connection& conn, int d);
    void on_readable(uint32_t slot, Connection& conn, int d, int result);
    void start_pair(uint32_t slot, Connection& conn, int d);
    void on_pair_half(uint32_t slot, Connection& conn, int d, Op op, int result);
    void on_writable(uint32_t slot, Connection& conn, int d, int result);
    void on_drained(uint32_t slot, Connection& conn, int d, int result);
    void follow(uint32_t slot, Connection& conn, int d, Next next, int failed_result);
    void release_pipe(Direction& dir, bool verify);
    void resume_pipe_waiters();
    void count_bytes(int d, int moved);

    uint64_t tag(Op op, uint32_t slot, const Connection& conn, int d = 0) const;
    static uint64_t shard_tag(Op op) { return OpTag{op}.encode(); }

    ShardSetup setup_;
    const EngineConfig& config_;
    Logger log_;
    uring::UniqueFd wake_fd_;
    std::unique_ptr<uring::Ring> ring_;
    std::unique_ptr<pipes::PipePool> pool_;
    uring::UniqueFd listener_;
    SocketAddress bound_;
    bool upstream_is_tcp_ = false;
    bool client_is_tcp_ = false;
    std::string description_;

    ConnectionTable table_;
    struct PipeWaiter {
        uint32_t slot;
        uint32_t generation;
        int direction;
    };
    std::deque<PipeWaiter> pipe_waiters_;

    unsigned shard_ops_in_flight_ = 0;
    bool accept_armed_ = false;
    bool accept_paused_ = false;
    bool pipe_retry_armed_ = false;
    std::chrono::milliseconds accept_backoff_{0};
    bool stopping_ = false;

    ShardCounters counters_;
};

} // namespace uringfwd::engine
