// One proxied connection: the client socket, the upstream socket, and the two
// directions that move bytes between them; and the table of a shard's connections.
// The life cycle is in connections.cpp.
#pragma once

#include "net/socket_address.hpp"
#include "routing/shared_limit.hpp"
#include "routing/source_limits.hpp"
#include "routing/tried_set.hpp"
#include "shard/connection/conn_socket.hpp"
#include "shard/directions/direction_state.hpp"
#include "shard/handover/resumed.hpp"
#include "shard/inspect/inspect.hpp"
#include "shard/loop/op_tag.hpp"
#include "shard/loop/shard_io.hpp"
#include "shard/socket_units.hpp"
#include "uring/unique_fd.hpp"
#include "uringfwd/close_reason.hpp"
#include "uringfwd/endpoint.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace uringfwd::engine {

struct ShardRoute;

// Inspecting: reading a preamble (inspect.hpp) before an upstream is chosen; only
// connections of routes with inspectors pass through it.
enum class Phase : uint8_t { Inspecting, Connecting, Forwarding, Closing };

// Choosing and connecting the upstream: the member (or the selector's address) being
// connected to, the members tried so far, and how the last attempt failed.
struct UpstreamAttempt {
    int member = -1;         // the pool member it is (being) connected to
    int preferred = -1;      // the selector's member, tried first
    bool has_chosen = false; // the selector chose an address outside the pool
    SocketAddress chosen;
    // The connect attempt under way (connect_to), kept while its socket is created
    // through the ring (direct descriptors): a member's address or `chosen`, both
    // stable while the connection lives.
    const SocketAddress* connect_target = nullptr;
    std::string connect_name;
    std::chrono::milliseconds connect_limit{0};
    // Counted among the member's connections (PoolState::opened): No when not (yet).
    SharedLimit::Taken member_taken = SharedLimit::Taken::No;
    // Waiting for a member with room (member_wait.cpp), its MemberWait timer armed.
    bool waiting_member = false;
    TriedSet tried;
    uint64_t client_hash = 0;                        // of the client's address, for Maglev
    CloseReason last_failure = CloseReason::Refused; // of the last connect attempt
    int last_error = 0;                              // its negated errno
    std::chrono::steady_clock::time_point connect_deadline;
};

// The inspect phase (inspect.hpp): what was read, how far the chain has got.
struct InspectState {
    std::vector<std::byte> buffer;
    std::size_t read = 0;     // bytes in buffer
    std::size_t consumed = 0; // by the inspectors done so far
    std::size_t stage = 0;    // the inspector being asked
    std::chrono::steady_clock::time_point deadline;
    SocketAddress transport_peer; // getpeername(), for the inspectors
    // The listen address's inspector (routes sharing it), after the route's chain.
    std::shared_ptr<const Inspector> listener_inspector;
};

// What the observer is told of a connection (observer.hpp: ConnectionInfo, then its
// ConnectionRecord, connection_records.cpp), and Engine::forward's id.
struct ObserverRecord {
    uint64_t id = 0;
    std::chrono::steady_clock::time_point opened_at;
    std::chrono::steady_clock::time_point connected_at; // epoch: never connected
    int close_error = 0;                                // negated errno behind the reason
    Endpoint client_address;                            // filled only for an observer
    Endpoint local_address;
    Endpoint upstream_address;     // once connected; the peer may be gone when it closes
    bool endpoints_filled = false; // client_address and local_address
    bool observed = false;         // the observer's on_open has been called
};

// An upgrade's connection hand-over (connection_handover.cpp): how far this one is.
enum class HandoverStep : uint8_t {
    None,       // served here (and not tried yet)
    Pausing,    // quiet: its reads and watches are being cancelled
    Installing, // paused: plain fds are being installed for its slots, to pass on
    Unmovable,  // refused by a successor and taken back: served here to its end
};

struct Connection {
    uint32_t slot = 0; // its place in the table, fixed for the table's lifetime
    uint32_t generation = 0;
    bool in_use = false;
    Phase phase = Phase::Connecting;
    CloseReason close_reason = CloseReason::Clean; // set when it starts closing
    ConnSocket client;
    ConnSocket upstream;
    // Operations on the sockets that nothing waits for (a setsockopt, a shutdown
    // through the ring): close() need not cancel anything for them.
    unsigned socket_ops = 0;
    Direction dirs[2];
    InFlight in_flight; // the slot is freed once nothing is

    // Routing: the route it came in on, and the upstream attempt.
    ShardRoute* route = nullptr; // lives at least as long as its connections
    bool route_counted = false;  // holds a unit of route->route.limit (SharedLimit)
    SocketUnits units;           // of the shard's socket budget (socket_units.hpp)
    // Its source's entry of the per-source table (source_gate.hpp), given back when it
    // is finalized; none unless its route has max_connections_per_source.
    SourceTable::Hold source_hold;
    UpstreamAttempt attempt; // the member chosen and connected to, the ones tried
    // When a byte last moved either way (the shard's clock of its last batch).
    std::chrono::steady_clock::time_point last_active;

    uint64_t bytes[2] = {0, 0}; // delivered, per Side
    ObserverRecord record;      // what the observer and the counts are told
    // Bytes the client sent before the engine took it over (Engine::forward): they go
    // to the upstream before anything else.
    // Also the bytes the inspect phase read and no inspector consumed, and a PROXY
    // header for the upstream: the first `preamble_own` bytes are the engine's own, not
    // the client's, and are not counted as forwarded.
    std::vector<std::byte> preamble;
    std::size_t preamble_sent = 0;
    std::size_t preamble_own = 0;
    bool caller_upstream = false; // Engine::forward_pair: the upstream is the caller's
    HandoverStep handover = HandoverStep::None;
    // Per Side, while it hands over: the read (a poll, a receive) is being cancelled;
    // it was, and the direction waits to be detached or to read again.
    bool cancelling[2] = {false, false};
    bool paused[2] = {false, false};
    // Asked to leave this shard: an upgrade hands its connections over, or it moves to
    // shard `move_to` of this engine (Engine::move_connection; -1: it stays). While it
    // is leaving, its directions take nothing more from a source than one read before
    // they wait for the source again (no splice pair straight after a full one, no
    // coalescing), so a bulk stream goes quiet too: every byte it has not forwarded is
    // then in the sockets, none in a pipe.
    bool leaving = false;
    int move_to = -1;
    // Since when a direction of it is held (Direction::held); a hold that has not led
    // to the pause by kHoldLimit is let go, and no direction holds again before
    // hold_again_at: a peer that writes before it reads must not wait on a hold.
    std::chrono::steady_clock::time_point holding_since;
    std::chrono::steady_clock::time_point hold_again_at;
    // Its last pause was called off for want of a pipe for its copy chunks: not paused
    // again before this (each try cancels a send and sends again).
    std::chrono::steady_clock::time_point pause_again_at;
    // A move gives up once this passes (a stream that never went quiet): it stays.
    std::chrono::steady_clock::time_point move_deadline;
    // Adopted (Engine::adopt) with direct descriptors: the client's and the upstream's
    // plain fds being put into slots, which the kernel writes over them
    // (connection_handover.cpp move_into_slots).
    int moving_into_slots[2] = {-1, -1};

    // The inspect phase's state (inspect.hpp), for connections that go through it
    // only, from open() to the end of the phase: none for routes without inspectors.
    std::unique_ptr<InspectState> inspect;
    // The socket's own addresses when they came with it (an accept into a slot of the
    // file table writes the peer's; the local one is the listener's bound address):
    // a slot has no fd for getpeername(2)/getsockname(2).
    bool socket_addresses_known = false;
    SocketAddress socket_peer;
    SocketAddress socket_local;
    // The client's addresses as a proxy in front reported them (a PROXY header), or as
    // the sockets tell when something needs them (has_addresses).
    bool has_addresses = false;
    SocketAddress client_sa;
    SocketAddress local_sa;
    std::vector<std::byte> proxy_tlvs; // to pass on in a PROXY v2 header

    // Being paused for an upgrade's hand-over (connection_handover.cpp).
    bool pausing() const {
        return handover == HandoverStep::Pausing || handover == HandoverStep::Installing;
    }

    // The socket a direction reads from, and the one it writes to.
    ConnSocket& source(Side side) { return side == Side::ToUpstream ? client : upstream; }
    ConnSocket& destination(Side side) { return side == Side::ToUpstream ? upstream : client; }

    Direction& dir(Side side) { return dirs[static_cast<int>(side)]; }
    const Direction& dir(Side side) const { return dirs[static_cast<int>(side)]; }
    bool both_done() const {
        return dirs[0].state == DirState::Done && dirs[1].state == DirState::Done;
    }
    // The tag of one of this connection's operations.
    OpTag tag(Op op, Side side = Side::ToUpstream) const {
        return OpTag::for_connection(op, slot, generation, side);
    }
};

// Slots for connections, reused through a free list. Connections never move, so a
// slot index in a completion's user_data stays valid for the connection's lifetime.
class ConnectionTable {
public:
    // A fresh connection (in_use, phase Connecting) in a free slot.
    Connection& allocate();
    // Resets the connection (closing what it still owns) and frees its slot.
    void release(Connection& conn);

    // The connection in slot if it is still the one with this generation.
    Connection* find(uint32_t slot, uint32_t generation);

    std::size_t active() const { return slots_.size() - free_.size(); }

    // Calls f for every connection open when it starts; f may open and close
    // connections (slots are visited by index, so a slot added meanwhile is not).
    template <typename F> void for_each_active(F&& f) {
        for (std::size_t i = 0, n = slots_.size(); i < n; ++i)
            if (slots_[i]->in_use)
                f(*slots_[i]);
    }

private:
    std::vector<std::unique_ptr<Connection>> slots_;
    std::vector<uint32_t> free_;
};

} // namespace uringfwd::engine
