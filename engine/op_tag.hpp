// What a completion belongs to, packed into the 64-bit user_data every io_uring
// operation carries: the operation, the direction, the connection slot and that
// slot's generation (so a completion can be matched to the connection that issued it).
#pragma once

#include <cstdint>

namespace uringfwd::engine {

enum class Op : uint8_t {
    // Shard-level operations (slot == kShardSlot).
    Accept = 1,
    AcceptPause,   // timer: accepting paused for lack of file descriptors
    Wake,          // the stop eventfd became readable
    PipeRetry,     // timer: try again to get pipes for waiting directions
    DrainDeadline, // timer: stop waiting for connections to finish
    ShardCancel,
    // Connection operations.
    Connect,
    ConnectTimeout,
    PollIn,
    PollOut,
    SpliceIn,   // socket -> pipe
    SpliceOut,  // pipe -> socket, hard-linked after SpliceIn
    Drain,      // pipe -> socket for bytes left over
    Recv,       // copy path: receive into a provided buffer
    Send,       // copy path: send a received chunk
    ErrorWatch, // poll for POLLERR/POLLHUP on the source of a finished direction
    Cancel,
};

struct OpTag {
    static constexpr uint32_t kShardSlot = 0xffffffffu;

    Op op;
    uint8_t direction = 0;   // 0 or 1
    uint32_t generation = 0; // 24 bits are kept
    uint32_t slot = kShardSlot;

    uint64_t encode() const {
        return static_cast<uint64_t>(slot) << 32 |
               static_cast<uint64_t>(generation & 0xffffffu) << 8 |
               static_cast<uint64_t>(direction & 1u) << 7 | static_cast<uint64_t>(op);
    }
    static OpTag decode(uint64_t v) {
        OpTag t{static_cast<Op>(v & 0x7f)};
        t.direction = static_cast<uint8_t>((v >> 7) & 1u);
        t.generation = static_cast<uint32_t>((v >> 8) & 0xffffffu);
        t.slot = static_cast<uint32_t>(v >> 32);
        return t;
    }
    bool for_shard() const { return slot == kShardSlot; }
};

} // namespace uringfwd::engine
