// What a completion belongs to, packed into the 64-bit user_data every io_uring
// operation carries: the operation, the kind of owner that submitted it (the shard, a
// listener, a connection), the owner's index (a listener's, a connection's slot), the
// slot's generation (so a completion can be matched to the connection that issued it)
// and the side. The layout is in docs/architecture.md ("The op tag").
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
    // Shard operations (Owner::Shard).
    Wake = 1,  // the stop eventfd became readable
    PipeRetry, // timer: try again to get pipes for waiting directions
    PipeRetryCancel,
    CoalesceTick,  // timer: bulk directions that woke too early splice again (bulk_coalesce)
    DrainDeadline, // timer: stop waiting for connections to finish
    IdleSweep,     // timer: close connections idle past their route's idle timeout
    LeaveTick,     // timer: connections leaving (a hand-over, moves) are looked at again
    ShardCancel,
    ShardCloseFile, // a waiting client's slot of the file table closed on stop
    // Listener operations (Owner::Listener, index = the listener's).
    Accept,
    AcceptPause, // timer: accepting paused for lack of file descriptors
    AcceptReady, // poll: a client waits in the backlog (accepting one at a time)
    ListenerCancel,
    ListenerCloseFile, // a client accepted into a slot after stop(): closed
    // Connection operations (Owner::Connection, index = the connection's slot).
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
    // A socket control (RouteConfig: keepalive, user timeout, mark, tos) set through the
    // ring on a slot; side: whose socket (ToUpstream: the client's, as for InstallFd).
    // Its own op, not SocketOpt, so that a failure is told apart from a shutdown's.
    SocketControl,
    // Engine::adopt with direct descriptors: the pair's plain fds put into slots of the
    // file table (connection_handover.cpp), before it forwards.
    MoveIntoSlots,
    // Not an operation (keep it last): one past the largest, for the static_assert
    // below. The dispatch switches list it with the operations that are not theirs.
    Count,
};

inline bool is_splice(Op op) {
    return op == Op::SpliceIn || op == Op::SpliceOut || op == Op::Drain;
}

// Who submitted an operation, and so whose in-flight count its completion settles.
// The shard's own timers of its directions (PipeRetry, CoalesceTick) are the shard's.
enum class Owner : uint8_t {
    Shard = 0,
    Listener = 1,
    Connection = 2,
};

// Bit layout, low to high (docs/architecture.md, "The op tag"):
//   0..5   op          6 bits
//   6..7   owner       2 bits
//   8      side        1 bit
//   9..32  generation  24 bits (a connection's; 0 for the others)
//   33..63 index       31 bits (a connection's slot, a listener's index; 0 for the shard)
// 31 bits hold any slot: a connection holds at least one descriptor, and a process has
// fewer than 2^31 (fs.nr_open is at most INT_MAX, a registered file table no larger).
// Encoding is a few shifts and ors, with no allocation, once per submission and once
// per completion; a cancel names its target by the same value.
struct OpTag {
    static constexpr unsigned kOpBits = 6;
    static constexpr unsigned kOwnerBits = 2;
    static constexpr unsigned kGenerationBits = 24;
    static constexpr unsigned kIndexBits = 31;
    static constexpr unsigned kOwnerShift = kOpBits;
    static constexpr unsigned kSideShift = kOwnerShift + kOwnerBits;
    static constexpr unsigned kGenerationShift = kSideShift + 1;
    static constexpr unsigned kIndexShift = kGenerationShift + kGenerationBits;
    static constexpr uint32_t kGenerationMask = (1u << kGenerationBits) - 1;
    static constexpr uint32_t kIndexMask = (1u << kIndexBits) - 1;

    Op op;
    Owner owner = Owner::Shard;
    Side side = Side::ToUpstream;
    uint32_t generation = 0; // kGenerationBits are kept
    uint32_t index = 0;      // kIndexBits are kept

    static constexpr OpTag for_shard(Op op) { return OpTag{op, Owner::Shard}; }
    static constexpr OpTag for_listener(Op op, uint32_t listener) {
        return OpTag{op, Owner::Listener, Side::ToUpstream, 0, listener};
    }
    static constexpr OpTag for_connection(Op op, uint32_t slot, uint32_t generation,
                                          Side side = Side::ToUpstream) {
        return OpTag{op, Owner::Connection, side, generation, slot};
    }

    constexpr uint64_t encode() const {
        return static_cast<uint64_t>(index & kIndexMask) << kIndexShift |
               static_cast<uint64_t>(generation & kGenerationMask) << kGenerationShift |
               static_cast<uint64_t>(static_cast<uint8_t>(side) & 1u) << kSideShift |
               static_cast<uint64_t>(static_cast<uint8_t>(owner)) << kOwnerShift |
               static_cast<uint64_t>(op);
    }
    // An owner value no encode() writes (3) decodes as it is: dispatch refuses it.
    static constexpr OpTag decode(uint64_t v) {
        OpTag t{static_cast<Op>(v & ((1u << kOpBits) - 1))};
        t.owner = static_cast<Owner>((v >> kOwnerShift) & ((1u << kOwnerBits) - 1));
        t.side = static_cast<Side>((v >> kSideShift) & 1u);
        t.generation = static_cast<uint32_t>(v >> kGenerationShift) & kGenerationMask;
        t.index = static_cast<uint32_t>(v >> kIndexShift) & kIndexMask;
        return t;
    }
    constexpr bool operator==(const OpTag&) const = default;
};

static_assert(static_cast<unsigned>(Op::Count) <= 1u << OpTag::kOpBits,
              "more operations than the op tag's op bits hold");
static_assert(static_cast<unsigned>(Owner::Connection) < 1u << OpTag::kOwnerBits,
              "more owner kinds than the op tag's owner bits hold");
static_assert(OpTag::kIndexShift + OpTag::kIndexBits == 64, "the op tag's fields fill 64 bits");

} // namespace uringfwd::engine
