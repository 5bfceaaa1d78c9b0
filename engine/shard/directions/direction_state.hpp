// The state of one direction of a connection (source socket -> destination socket):
// where it is in its state machine and what it holds. The behaviour is in
// directions.cpp; the decisions, as pure functions, in direction_logic.hpp.
#pragma once

#include "pipes/pipe.hpp"
#include "shard/directions/direction_logic.hpp"
#include "uring/file_ref.hpp"

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <optional>

namespace uringfwd::engine {

enum class DirState : uint8_t {
    Idle,        // not started (connection still connecting)
    PollingIn,   // one-shot POLLIN armed on the source (none while held); holds no pipe
    WaitingPipe, // source readable, no pipe free: queued for one
    WaitingFd,   // inline: a plain fd is being installed for a socket in a slot
    Coalescing,  // inline, bulk: woke too early; splices again at the shard's next tick
    Splicing,    // socket->pipe->socket pair in flight (inline: being spliced now)
    PollingOut,  // bytes in the pipe, destination full: POLLOUT armed
    Draining,    // pipe->socket splice in flight (ring only)
    Copying,     // copy path: receives and sends in flight or queued (see Direction)
    Done,        // source ended, everything delivered, destination's write side shut
};

// Bytes received into a provided buffer and not yet all sent (the first chunk's
// sent bytes are Direction::first_sent).
struct CopyChunk {
    uint16_t buffer = 0;
    bool bulk = false; // from the bulk buffer group, else the small one
    uint32_t length = 0;
};

// What a direction needs once it has used the bulk buffers, made then and kept until
// the connection's slot is reused: room for kMaxChunks chunks, and the message of a
// vectored send of several (the kernel may read it after the submission: older kernels
// import the iovec only when the send goes async). Every other direction keeps its
// two chunks inline, so a connection that never goes bulk costs no more.
struct BulkStore {
    CopyChunk chunks[kMaxChunks]{};
    msghdr msg{};
    iovec iov[kMaxChunks]{};
};

struct Direction {
    uring::FileRef src;
    uring::FileRef dst;
    DirState state = DirState::Idle;
    std::optional<pipes::Pipe> pipe; // leased only while bytes may move
    int pair_in = 0;                 // results of the pair in flight
    int pair_out = 0;
    uint8_t pair_pending = 0;
    bool watching = false; // a multishot error watch is armed on src
    // Its connection is leaving (Connection::leaving) and it holds nothing: it reads
    // no more until the pause (PollingIn or Copying with no read in flight; its source
    // watched for errors), so that the connection becomes quiet once the other
    // direction is (a bulk stream's read would come back with bytes before a cancel
    // reached it). Directions::should_hold says when.
    bool held = false;
    bool parked = false; // src made blocking: its splices wait in the kernel (bulk_park)
    // Adopted with bytes in its pipe (Resumed::unsent): it delivers them through the
    // ring, then takes the path and mechanism its shard gives a direction.
    bool unsent_first = false;
    // Input reached the source while the connection closed (a receive or a readable
    // poll came in after the close): it is forwarded to nobody.
    bool discarded = false;
    // Splices run inline (splice(2) on the shard's thread) rather than through the ring.
    bool inline_splice = false;
    // Inline: bytes an inline wake-up of this direction moved, a moving average (1/4 of
    // the newest): what tells a bulk stream that woke early from a request (bulk_coalesce).
    uint32_t wake_bytes_avg = 0;

    // Copy path. A few chunks (kMaxSmallHeld small or kMaxBulkHeld bulk buffers,
    // direction_logic.hpp): received while the previous ones are sent; order is kept by
    // construction (one receive and one send in flight at most, chunks sent first in,
    // first out).
    Path path = Path::Splice;
    CopyChunk small_chunks[kMaxSmallHeld]; // the chunks until bulk_store exists
    std::unique_ptr<BulkStore> bulk_store;
    uint8_t chunk_count = 0;
    uint32_t first_sent = 0;     // bytes of chunks[0] already sent
    bool bulk = false;           // receives go to the bulk buffers (Copy's bulk directions)
    bool receiving_bulk = false; // the receive in flight is a bulk one
    bool sending_vector = false; // the send in flight is a sendmsg of several chunks
    bool vector_blocked = false; // it found the socket full: send one chunk next
    uint8_t full_in_a_row = 0;   // full buffers received in a row (Auto's bulk signal)
    uint8_t small_in_a_row = 0;  // small splice (or bulk-buffer) reads in a row
    bool receiving = false;      // a receive is in flight
    bool sending = false;        // a send of the first chunk(s) is in flight
    bool source_ended = false;   // a receive returned 0 (FIN)
    bool to_splice = false;      // move to the splice path once the chunks are sent
    bool waiting_buffer = false; // the buffer group was empty: queued for one

    // The chunks held, oldest first: chunk_count of them.
    CopyChunk* chunks() { return bulk_store ? bulk_store->chunks : small_chunks; }
    const CopyChunk* chunks() const { return bulk_store ? bulk_store->chunks : small_chunks; }
};

} // namespace uringfwd::engine
