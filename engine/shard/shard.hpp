// A shard: one thread, one io_uring, its listeners, connections, pipes and copy
// buffers. This class is the loop and the dispatch; the owners it dispatches to live
// in their own files (listener, connections, directions, shard_io). Nothing in a
// shard is touched by another thread except its counters (atomics the shard alone
// writes) and its wake-up eventfd.
#pragma once

#include "net/socket_address.hpp"
#include "pipes/pipe_pool.hpp"
#include "shard/connections.hpp"
#include "shard/listener.hpp"
#include "shard/shard_context.hpp"
#include "shard/shard_counters.hpp"
#include "shard/shard_io.hpp"
#include "support/logger.hpp"
#include "uring/provided_buffers.hpp"
#include "uring/unique_fd.hpp"
#include "uringfwd/config.hpp"

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace uringfwd::engine {

struct ShardSetup {
    int index = 0;
    const EngineConfig* config = nullptr;
    ListenerSetup listener; // its index is 0: one listener per shard for now
    SocketAddress upstream;
    int cpu = -1;                 // pin to this CPU (-1: don't pin)
    std::vector<int> worker_cpus; // io-wq affinity (empty: leave as is)
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
    int listener_fd() const { return listeners_.front()->fd(); }
    int cpu() const { return setup_.cpu; }
    std::string describe() const { return description_; }

private:
    void setup();
    void setup_ring();
    void setup_buffers();
    void serve();
    bool done_serving() const;
    void after_batch();
    void dispatch(const uring::Completion& c);
    void on_listener_op(const OpTag& tag, const uring::Completion& c);
    void open_connection(Listener& listener, int client_fd);
    void on_wake(int result);
    void begin_stop();
    void finish_when_idle();
    void log_pool_notices();

    ShardSetup setup_;
    const EngineConfig& config_;
    Logger log_;
    uring::UniqueFd wake_fd_;
    ShardCounters counters_;
    // Made on the shard's thread in setup(), in this order; destroyed in reverse, so
    // the copy buffers are unregistered before their ring goes.
    std::unique_ptr<ShardIo> io_;
    std::unique_ptr<pipes::PipePool> pool_;
    std::unique_ptr<uring::ProvidedBuffers> buffers_; // null: splice only
    DataPath data_path_ = DataPath::Auto;             // what the shard really does
    std::unique_ptr<ShardContext> context_;
    std::unique_ptr<Connections> connections_;
    std::vector<std::unique_ptr<Listener>> listeners_;
    SocketAddress bound_;
    std::string description_;

    InFlight in_flight_; // the wake-up poll, the drain deadline, their cancels
    bool stopping_ = false;
    bool drain_timer_armed_ = false;
    bool final_cancels_sent_ = false;
    // Written by request_stop() on any thread before it writes the eventfd.
    std::atomic<int64_t> drain_ms_{0};
    std::atomic<bool> finished_{false};
};

} // namespace uringfwd::engine
