// Seeing each connection open and close: an embedding application (a gateway's access
// log, its own metrics) sets EngineConfig::observer.
#pragma once

#include "uringfwd/close_reason.hpp"
#include "uringfwd/endpoint.hpp"

#include <chrono>
#include <cstdint>
#include <string_view>

namespace uringfwd {

struct ConnectionInfo {
    uint64_t id = 0; // unique in the engine: the shard in the top 16 bits
    int shard = 0;
    std::string_view route; // valid during the call only
    Endpoint client;        // who connected (unix: the path, often empty); with
                            // accept_proxy, the source its PROXY header gave
    Endpoint local;         // the address it connected to (with accept_proxy: the
                            // header's destination)
};

struct ConnectionRecord {
    ConnectionInfo info;
    // The member it was forwarded to; for one that never got there, the member (or
    // selected address) its last connect attempt went to, whose failure `reason` and
    // `error` give; empty when none was tried.
    Endpoint upstream;
    uint64_t bytes_to_upstream = 0;
    uint64_t bytes_to_client = 0;
    std::chrono::microseconds connect_time{0}; // accept to upstream connected; 0 if never
    std::chrono::microseconds duration{0};     // accept to close
    CloseReason reason = CloseReason::Clean;
    int error = 0; // the errno behind the reason, 0 when there is none
};

// Called on the shard thread that serves the connection, between two batches of its
// completions: a call that blocks stalls every connection of that shard. Copy what you
// need and return; hand slow work (writing a file, a network call) to a thread of your
// own through a buffer. Calls for one connection come from one thread, in order;
// calls for different connections may come from several shard threads at once, so
// shared state needs a lock or, better, one buffer per shard (ConnectionInfo::shard).
class ConnectionObserver {
public:
    virtual ~ConnectionObserver() = default;
    // A client was accepted (or handed over with Engine::forward) and is about to be
    // connected to an upstream.
    virtual void on_open(const ConnectionInfo& info) = 0;
    // The connection has closed, both sides; exactly once per on_open().
    virtual void on_close(const ConnectionRecord& record) = 0;
};

} // namespace uringfwd
