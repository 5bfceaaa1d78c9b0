// A shard: one thread, one io_uring, one listener, its own connections and pipes.
// Nothing in a shard is touched by another thread except its counters (atomics the
// shard alone writes) and its wake-up eventfd.
#pragma once

#include "connection.hpp"
#include "direction_logic.hpp"
#include "log_throttle.hpp"
#include "logger.hpp"
#include "op_tag.hpp"
#include "pipes/pipe_pool.hpp"
#include "socket_address.hpp"
#include "uring/provided_buffers.hpp"
#include "uring/ring.hpp"
#include "uring/unique_fd.hpp"
#include "uringfwd/config.hpp"
#include "uringfwd/stats.hpp"

#include <atomic>
#include <chrono>
#include <deque>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

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
    std::atomic<uint64_t> copy_receives{0};
    std::atomic<uint64_t> copy_sends{0};
    std::atomic<uint64_t> buffers_out{0};
    std::atomic<uint64_t> buffer_waits{0};
    std::atomic<uint64_t> switches_to_splice{0};
    std::atomic<uint64_t> switches_to_copy{0};
    std::atomic<int> thread_id{0}; // the shard thread's tid: its io-wq workers are "iou-wrk-<tid>"

    void add_to(EngineStats& total) const;
};

struct ShardSetup {
    int index = 0;
    const EngineConfig* config = nullptr;
    SocketAddress listen;
    SocketAddress upstream;
    int cpu = -1;                 // pin to this CPU (-1: don't pin)
    std::vector<int> worker_cpus; // io-wq affinity (empty: leave as is)
    // Shard 0 of a TCP listener group attaches the steering program with this base.
    std::optional<int> steering_base;
    bool set_incoming_cpu = false;
    // Unix sockets have no SO_REUSEPORT: shards after the first accept on a dup of the
    // first shard's listener instead (the kernel wakes one waiter per connection).
    int shared_listener = -1;
};

class Shard {
public:
    Shard(ShardSetup setup, Logger logger);
    ~Shard();

    // The thread body: sets up the ring, pipe pool and listener, reports success or
    // the failure through `ready`, then serves until stopped.
    void run(std::promise<void>& ready);

    // Thread-safe: wakes the shard and makes it stop accepting; connections left after
    // `drain` are reset. A later call keeps the first deadline, unless its drain is 0:
    // then everything is reset at once.
    void request_stop(std::chrono::milliseconds drain);

    const ShardCounters& counters() const { return counters_; }
    // True once run() has returned (or never got past setup).
    bool finished() const { return finished_.load(std::memory_order_acquire); }
    // Valid once run() reported ready.
    SocketAddress bound_address() const { return bound_; }
    int listener_fd() const { return listener_.get(); }
    int cpu() const { return setup_.cpu; }
    std::string describe() const { return description_; }

private:
    void setup();
    void serve();
    bool done_serving() const;
    void dispatch(const uring::Completion& c);
    void publish_counters();
    void log_pool_notices();

    // Listener
    void arm_accept();
    void on_accept(const uring::Completion& c);
    void on_accept_pause_over();
    void note_fd_shortage(const char* what, int err);
    void on_wake(int result);
    void begin_stop();
    void abort_all(const char* reason);
    void finish_when_idle();
    void submit_shard_op_timeout(Op op, std::chrono::milliseconds after);

    // Connection life cycle
    void on_new_client(int fd);
    void on_connection_op(const OpTag& tag, const uring::Completion& c);
    void on_connected(uint32_t slot, Connection& conn, int result);
    void abort(uint32_t slot, Connection& conn, const std::string& reason);
    void close_connection(uint32_t slot, Connection& conn, bool reset);
    void on_error_watch(uint32_t slot, Connection& conn, int d, int result, bool more);
    void watch_source(uint32_t slot, Connection& conn, int d);
    void unwatch_source(uint32_t slot, Connection& conn, int d);
    void settle(uint32_t slot, Connection& conn);
    void finalize(uint32_t slot, Connection& conn);

    // Directions
    void start_reading(uint32_t slot, Connection& conn, int d);
    // False when a poll completion needs no more handling: the connection is closing,
    // or the poll failed (then the connection is reset).
    bool poll_succeeded(uint32_t slot, Connection& conn, int result);
    void on_readable(uint32_t slot, Connection& conn, int d, int result);
    void start_pair(uint32_t slot, Connection& conn, int d);
    void on_pair_half(uint32_t slot, Connection& conn, int d, Op op, int result);
    void on_writable(uint32_t slot, Connection& conn, int d, int result);
    void on_drained(uint32_t slot, Connection& conn, int d, int result);
    // Carries out `next`; the splice results name the error when it is a failure.
    void follow(uint32_t slot, Connection& conn, int d, Next next, int read_result,
                int write_result);
    // The end of a direction whose source sent FIN and whose bytes are all delivered.
    void end_direction(uint32_t slot, Connection& conn, int d);

    // Copy path
    void start_direction(uint32_t slot, Connection& conn, int d);
    void pump_copy(uint32_t slot, Connection& conn, int d);
    void send_first_chunk(uint32_t slot, Connection& conn, int d);
    void on_received(uint32_t slot, Connection& conn, int d, const uring::Completion& c);
    void on_sent(uint32_t slot, Connection& conn, int d, int result);
    void give_back_chunks(Direction& dir);
    void resume_buffer_waiters();

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
    // Copy path buffers (null when the data path is splice, or the kernel refused them
    // under Auto). Declared after ring_: unregistered before the ring goes.
    std::unique_ptr<uring::ProvidedBuffers> buffers_;
    DataPath data_path_ = DataPath::Auto; // what the shard really does
    uring::UniqueFd listener_;
    SocketAddress bound_;
    bool upstream_is_tcp_ = false;
    bool client_is_tcp_ = false;
    std::string description_;

    ConnectionTable table_;
    struct WaitingDirection {
        uint32_t slot;
        uint32_t generation;
        int direction;
    };
    std::deque<WaitingDirection> pipe_waiters_;
    std::deque<WaitingDirection> buffer_waiters_; // copy directions that found no buffer

    unsigned shard_ops_in_flight_ = 0;
    unsigned splices_in_flight_ = 0; // submitted, completion not yet seen
    bool accept_armed_ = false;
    bool accept_paused_ = false;
    bool accept_cancel_pending_ = false;
    bool pause_wanted_ = false; // pause accepting once the multishot accept has ended
    bool pipe_retry_armed_ = false;
    std::chrono::milliseconds accept_backoff_{0};
    bool stopping_ = false;
    bool drain_timer_armed_ = false;
    bool final_cancels_sent_ = false;
    // Written by request_stop() on any thread before it writes the eventfd.
    std::atomic<int64_t> drain_ms_{0};
    std::atomic<bool> finished_{false};

    LogThrottle upstream_failure_log_;

    ShardCounters counters_;
};

} // namespace uringfwd::engine
