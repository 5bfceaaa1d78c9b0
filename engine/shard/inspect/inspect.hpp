// The inspect phase: a short preamble read before a connection's upstream is chosen (a
// PROXY protocol header, a TLS ClientHello). A route whose listeners need it has a chain
// of inspectors; a newly accepted client of such a route is read into a small buffer of
// its own (at most kInspectBufferCap bytes) within the route's inspect_timeout, and the
// inspectors are asked, in order, what they make of it. A route without inspectors skips
// the phase entirely: no buffer, no extra syscall, no delay.
//
// How the shard runs the chain (Inspection, inspection.cpp):
//  - right after accept, before anything is read, each inspector is asked once with no
//    bytes (so it can reject at once, e.g. an untrusted source, or step aside: Done(0));
//  - then the client is read with one recv at a time, linked to a timeout for what is
//    left of inspect_timeout (io_uring IORING_OP_LINK_TIMEOUT; see inspection.cpp for
//    why not the shard's sweep), and after every read the current inspector is asked
//    again with every byte it has not seen consumed: it answers
//      NeedMore  read more (the buffer full or the client at EOF: the connection is
//                reset, closed_inspect_oversized / closed_inspect_incomplete),
//      Done      it is finished with the connection: `consumed` bytes at the front are
//                its own (a PROXY header: not part of the stream); it may carry the
//                client's real addresses and a route choice; the next inspector sees
//                the bytes after them,
//      Reject    reset the client, counted under `reason`, one throttled log line;
//  - after the last inspector, the bytes read and not consumed belong to the stream:
//    they become the connection's preamble and reach the upstream before any other
//    client byte (the mechanism Engine::forward's already_read uses).
//
// Inspectors are immutable once built and hold no per-connection state: they are
// handed the bytes again on every call, so an inspector parses from the start each time
// (a header of a few hundred bytes; a parser that needs the length first looks at
// that alone until it has them all). They run on the shard's thread and must not block.
#pragma once

#include "net/socket_address.hpp"
#include "uringfwd/close_reason.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace uringfwd::engine {

struct Route;

// The most bytes the inspect phase reads from one client (a ClientHello with
// post-quantum key shares is 2-3 KiB; a PROXY v2 header with TLVs rarely 1).
inline constexpr std::size_t kInspectBufferCap = 16 * 1024;

// What an inspector is shown.
struct InspectInput {
    // Received and not consumed by the inspectors before this one. Empty on the first
    // call (right after accept); grows by what each read brought.
    std::span<const std::byte> bytes;
    // The client's transport address (getpeername): who really connected.
    const SocketAddress& peer;
};

struct InspectVerdict {
    enum class Kind : uint8_t { NeedMore, Done, Reject };
    Kind kind = Kind::NeedMore;

    // Done: bytes at the front of the input that are not part of the stream (0 for
    // an inspector that only looks, like a ClientHello peek).
    std::size_t consumed = 0;
    // Done: the client's addresses as a proxy in front of the engine reported them.
    // From then on they are what the selector, the observer, the Maglev hash and a
    // PROXY header sent upstream see.
    std::optional<SocketAddress> client;
    std::optional<SocketAddress> local;
    // Done: PROXY v2 TLVs to pass on in a v2 header sent upstream, already encoded
    // (type, 16-bit length, value).
    std::vector<std::byte> tlvs;
    // Done: serve the connection on this route instead (an index into the routes of
    // the table the connection's route belongs to: RouteTable::routes). Its pool,
    // selector and send_proxy apply from then on; its limit is not checked again.
    std::optional<std::size_t> route;

    // Reject: the counted reason and a few words for the log line.
    CloseReason reason = CloseReason::LocalError;
    std::string detail;

    static InspectVerdict need_more() { return {}; }
    static InspectVerdict done(std::size_t consumed) {
        InspectVerdict v;
        v.kind = Kind::Done;
        v.consumed = consumed;
        return v;
    }
    static InspectVerdict reject(CloseReason reason, std::string detail) {
        InspectVerdict v;
        v.kind = Kind::Reject;
        v.reason = reason;
        v.detail = std::move(detail);
        return v;
    }
};

class Inspector {
public:
    virtual ~Inspector() = default;
    // For log lines: "PROXY header", "TLS ClientHello".
    virtual std::string_view name() const = 0;
    // See the top of this file. Must be bounds-checked: the bytes come from anyone.
    virtual InspectVerdict inspect(const InspectInput& input) const = 0;
};

using InspectorChain = std::vector<std::unique_ptr<const Inspector>>;

// The chain a route's clients go through, in order (PROXY header first, then the
// ClientHello); empty for a route that needs none. Built once per shard and route.
InspectorChain make_inspectors(const Route& route);

} // namespace uringfwd::engine
