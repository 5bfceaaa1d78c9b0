// One proxied connection: the client socket, the upstream socket, and the two
// directions that move bytes between them.
#pragma once

#include "direction_logic.hpp"
#include "pipes/pipe.hpp"
#include "uring/unique_fd.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace uringfwd::engine {

enum class DirState : uint8_t {
    Idle,        // not started (connection still connecting)
    PollingIn,   // one-shot POLLIN armed on the source; holds no pipe
    WaitingPipe, // source readable, no pipe free: queued for one
    Splicing,    // socket->pipe->socket pair in flight
    PollingOut,  // bytes in the pipe, destination full: POLLOUT armed
    Draining,    // pipe->socket splice in flight
    Copying,     // copy path: receives and sends in flight or queued (see Direction)
    Done,        // source ended, everything delivered, destination's write side shut
};

// Bytes received into a provided buffer and not yet all sent.
struct CopyChunk {
    uint16_t buffer = 0;
    uint32_t length = 0;
    uint32_t sent = 0;
};

struct Direction {
    int src = -1;
    int dst = -1;
    DirState state = DirState::Idle;
    std::optional<pipes::Pipe> pipe; // leased only while bytes may move
    int pair_in = 0;                 // results of the pair in flight
    int pair_out = 0;
    uint8_t pair_pending = 0;
    bool watching = false; // a multishot error watch is armed on src

    // Copy path. At most two chunks: one being sent while the next is received, so a
    // direction never holds more than two buffers and order is kept by construction
    // (one receive and one send in flight at most, chunks sent first in, first out).
    static constexpr uint8_t kMaxChunks = 2;
    Path path = Path::Splice;
    CopyChunk chunks[kMaxChunks];
    uint8_t chunk_count = 0;
    uint8_t full_in_a_row = 0;   // full buffers received in a row (Auto's bulk signal)
    uint8_t small_in_a_row = 0;  // small splice reads in a row (Auto's chat signal)
    bool receiving = false;      // a receive is in flight
    bool sending = false;        // a send of chunks[0] is in flight
    bool source_ended = false;   // a receive returned 0 (FIN)
    bool to_splice = false;      // move to the splice path once the chunks are sent
    bool waiting_buffer = false; // the buffer group was empty: queued for one
};

enum class Phase : uint8_t { Connecting, Forwarding, Closing };

struct Connection {
    static constexpr int kToUpstream = 0; // direction 0: client -> upstream
    static constexpr int kToClient = 1;   // direction 1: upstream -> client

    bool in_use = false;
    uint32_t generation = 0;
    Phase phase = Phase::Connecting;
    bool reset_on_close = false; // close with RST: the stream was cut, not ended
    uring::UniqueFd client;
    uring::UniqueFd upstream;
    Direction dirs[2];
    unsigned ops_in_flight = 0; // completions still to come; the slot is freed at 0

    bool both_done() const {
        return dirs[0].state == DirState::Done && dirs[1].state == DirState::Done;
    }
};

// The peers a direction reads from and writes to, for log lines.
inline const char* source_name(int d) {
    return d == Connection::kToUpstream ? "client" : "upstream";
}
inline const char* destination_name(int d) {
    return d == Connection::kToUpstream ? "upstream" : "client";
}

// Slots for connections, reused through a free list. Connections never move, so a
// slot index in a completion's user_data stays valid for the connection's lifetime.
class ConnectionTable {
public:
    // Returns a slot whose Connection is fresh (in_use, phase Connecting).
    uint32_t allocate();
    // Resets the connection (closing what it still owns) and frees the slot.
    void release(uint32_t slot);

    Connection& at(uint32_t slot) { return *slots_[slot]; }
    // The connection in slot if it is still the one with this generation.
    Connection* find(uint32_t slot, uint32_t generation);

    std::size_t active() const { return slots_.size() - free_.size(); }

    template <typename F> void for_each_active(F&& f) {
        for (std::size_t i = 0; i < slots_.size(); ++i)
            if (slots_[i]->in_use)
                f(static_cast<uint32_t>(i), *slots_[i]);
    }

private:
    std::vector<std::unique_ptr<Connection>> slots_;
    std::vector<uint32_t> free_;
};

} // namespace uringfwd::engine
