// What a completion belongs to, packed into the 64-bit user_data every io_uring
// operation carries: the operation, the side, the owner's slot and that slot's
// generation (so a completion can be matched to the connection that issued it).
#pragma once

#include <cstdint>

namespace uringfwd::engine {

// The two directions of a connection, named by where their bytes go.
enum class Side : uint8_t {
    ToUpstream = 0, // client -> upstream
    ToClient = 1,   // upstream -> client
};
inline constexpr Side kBothSides[] = {Side::ToUpstream, Side::ToClient};

inline Side other(Side side) {
    return side == Side::ToUpstream ? Side::ToClient : Side::ToUpstream;
}
// The peers a direction reads from and writes to, for log lines.
inline const char* source_name(Side side) {
    return side == Side::ToUpstream ? "client" : "upstream";
}
inline const char* destination_name(Side side) {
    return side == Side::ToUpstream ? "upstream" : "client";
}

enum class Op : uint8_t {
    // Shard operations (slot == kShardSlot, index 0).
    Wake = 1,  // the stop eventfd became readable
    PipeRetry, // timer: try again to get pipes for waiting directions
    PipeRetryCancel,
    CoalesceTick,  // timer: bulk directions that woke too early splice again (bulk_coalesce)
    DrainDeadline, // timer: stop waiting for connections to finish
    IdleSweep,     // timer: close connections idle past their route's idle timeout
    ShardCancel,
    ShardCloseFile, // a waiting client's slot of the file table closed on stop
    // Listener operations (slot == kShardSlot, index = the listener's).
    Accept,
    AcceptPause, // timer: accepting paused for lack of file descriptors
    AcceptReady, // poll: a client waits in the backlog (accepting one at a time)
    ListenerCancel,
    ListenerCloseFile, // a client accepted into a slot after stop(): closed
    // Connection operations (slot = the connection's).
    InspectRecv,    // inspect phase: a read of the client's preamble
    InspectTimeout, // linked to it: what is left of the route's inspect_timeout
    Connect,
    ConnectTimeout,
    Preamble, // bytes read before a hand-over, sent to the upstream first
    PollIn,
    PollOut,
    SpliceIn,   // socket -> pipe
    SpliceOut,  // pipe -> socket, hard-linked after SpliceIn
    Drain,      // pipe -> socket for bytes left over
    Recv,       // copy path: receive into a provided buffer
    Send,       // copy path: send a received chunk
    ErrorWatch, // poll for POLLERR/POLLHUP on the source of a finished direction
    Cancel,
    // Registered (direct) descriptors.
    Socket,    // the upstream socket created into a slot of the file table
    SocketOpt, // setsockopt (TCP_NODELAY) or shutdown through the ring: nothing to do after
    CloseFile, // a slot closed (with SO_LINGER {1, 0} first when resetting)
    HalfClose, // a plain fd installed for a slot, to shutdown(SHUT_WR) the socket
    InstallFd, // a plain fd installed for a slot, kept for inline splices; side: the
               // direction whose source the socket is (ToUpstream: the client's)
    // Timer: a connection waiting for a member with room (every member it may go to is
    // at its max_connections) gives up at its connect deadline.
    MemberWait,
};

inline bool is_splice(Op op) {
    return op == Op::SpliceIn || op == Op::SpliceOut || op == Op::Drain;
}

struct OpTag {
    static constexpr uint32_t kShardSlot = 0xffffffffu;

    Op op;
    Side side = Side::ToUpstream;
    uint32_t generation = 0; // 24 bits are kept; a listener's index for listener ops
    uint32_t slot = kShardSlot;

    static OpTag for_shard(Op op, uint32_t index = 0) {
        return OpTag{op, Side::ToUpstream, index, kShardSlot};
    }
    static OpTag for_connection(Op op, uint32_t slot, uint32_t generation,
                                Side side = Side::ToUpstream) {
        return OpTag{op, side, generation, slot};
    }

    uint64_t encode() const {
        return static_cast<uint64_t>(slot) << 32 |
               static_cast<uint64_t>(generation & 0xffffffu) << 8 |
               static_cast<uint64_t>(static_cast<uint8_t>(side) & 1u) << 7 |
               static_cast<uint64_t>(op);
    }
    static OpTag decode(uint64_t v) {
        OpTag t{static_cast<Op>(v & 0x7f)};
        t.side = static_cast<Side>((v >> 7) & 1u);
        t.generation = static_cast<uint32_t>((v >> 8) & 0xffffffu);
        t.slot = static_cast<uint32_t>(v >> 32);
        return t;
    }
    bool for_shard() const { return slot == kShardSlot; }
    // The listener's index, for listener operations.
    uint32_t index() const { return generation; }
};

} // namespace uringfwd::engine
