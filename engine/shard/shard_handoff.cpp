// Connections the application hands over to a running shard (Engine::forward and
// forward_pair): posted to its mailbox by any thread, taken when its eventfd fires.
#include "shard/shard.hpp"

#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>

namespace uringfwd::engine {

namespace {

// At most this much is read from a pair's client before its connection starts; the
// rest follows through the data path, after it.
constexpr std::size_t kEarlyReadMax = 16 * 1024;

// forward_pair: the upstream is connected already, so what the client has sent by now
// can go at once. Read here, it becomes the connection's preamble and its send goes
// into the ring with the submission that starts the connection; left to the data path
// it would be received in that submission and sent in the next, one ring round trip
// later (bench/RESULTS.md run 7). The preamble goes first and the
// client's next bytes wait in its socket until it has, so nothing is reordered.
//
// FIONREAD before recv(): a recv() that finds no data but an error (the client reset)
// takes the error off the socket (sock_error() clears sk_err; net/ipv4/tcp.c,
// tcp_recvmsg_locked), and the data path has to see that error to reset the upstream
// too. With bytes queued, recv() returns them and leaves an error for later.
void read_what_waits(Handoff& handoff) {
    int queued = 0;
    if (::ioctl(handoff.client.fd(), FIONREAD, &queued) != 0 || queued <= 0)
        return;
    std::size_t had = handoff.preamble.size();
    std::size_t want = std::min(static_cast<std::size_t>(queued), kEarlyReadMax);
    handoff.preamble.resize(had + want);
    ssize_t got = ::recv(handoff.client.fd(), handoff.preamble.data() + had, want, MSG_DONTWAIT);
    handoff.preamble.resize(had + (got > 0 ? static_cast<std::size_t>(got) : 0));
}

} // namespace

bool Shard::hand_over(Handoff& handoff) {
    struct Take {
        Shard* shard;
        Handoff handoff;
        void operator()() { shard->take_handoff(handoff); }
    };
    Take task{this, std::move(handoff)};
    if (mailbox_.post(std::move(task)))
        return true;
    handoff = std::move(task.handoff); // refused, so not moved from: the caller keeps it
    return false;
}

// Dropped without a word while the shard stops, as one refused is; its sockets are
// reset as they go (the stream is cut before it began).
void Shard::take_handoff(Handoff& handoff) {
    // One the successor of an upgrade refused comes back to a draining shard: it was
    // open all along, and drains with the rest.
    if (stopping_ && !handoff.resumed)
        return;
    ShardRoute* route = nullptr;
    for (auto& each : routes_)
        if (each->route.name == handoff.route)
            route = each.get();
    if (handoff.resumed && handoff.resumed->moved) {
        take_moved(handoff, route); // from another shard of this engine
        return;
    }
    if (route == nullptr) {
        // The route went away in a reconfiguration after forward() checked it.
        log_.warn("a connection handed over for route \"{}\" has no route to go to; "
                  "resetting it",
                  handoff.route);
        return;
    }
    if (handoff.upstream.valid() && !handoff.resumed)
        read_what_waits(handoff);
    // Plain fds (the caller's): a unit of the fd limit's connections; an upstream the
    // engine opens goes into a slot with direct descriptors. An adopted pair goes into
    // slots with direct descriptors (Connections::move_into_slots): a slot's unit then,
    // and none of the fd limit's, which bounds the ones on their way in only.
    SocketUnits units = take_handoff_units(handoff);
    // No TCP_NODELAY to set: the caller's thread has set it already
    // (api/handoff.cpp prepare_socket).
    const bool carried_on_while_stopping = stopping_ && handoff.resumed;
    admit(*route, {.client = std::move(handoff.client),
                   .preamble = std::move(handoff.preamble),
                   .upstream = std::move(handoff.upstream),
                   .units = units,
                   .resumed = std::move(handoff.resumed)});
    if (carried_on_while_stopping)
        keep_drain_deadline();
}

SocketUnits Shard::take_handoff_units(const Handoff& handoff) {
    const bool into_slots = handoff.resumed && direct_;
    return take_units(/*plain_fd=*/!into_slots,
                      /*slot=*/into_slots || !handoff.upstream.valid());
}

void Shard::set_handover(bool on, UnsentBytes unsent) {
    connections_->set_handover(on ? setup_.detached.get() : nullptr, unsent);
}

} // namespace uringfwd::engine
