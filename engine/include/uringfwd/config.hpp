// Everything an Engine needs to know before it starts.
#pragma once

#include "uringfwd/endpoint.hpp"
#include "uringfwd/log.hpp"

#include <chrono>
#include <cstddef>

namespace uringfwd {

struct EngineConfig {
    Endpoint listen;   // where clients connect
    Endpoint upstream; // where their bytes go

    // An upstream that has not accepted the connection by then is given up on and the
    // client is reset.
    std::chrono::milliseconds connect_timeout{5000};

    // Upper bound on pipes per shard (idle + leased). When all are leased, a direction
    // that has data waits for one (backpressure) instead of failing.
    std::size_t max_pipes = 128;

    // Pipe capacity to ask for; 0 = /proc/sys/fs/pipe-max-size. The pool asks for less
    // when the kernel refuses (per-user pipe budget).
    std::size_t pipe_size = 0;

    // io_uring submission queue entries per shard.
    unsigned ring_entries = 4096;

    LogLevel log_level = LogLevel::Info;
    LogSink log_sink; // empty = stderr
};

} // namespace uringfwd
