// Connections the application hands over to a running shard (Engine::forward and
// forward_pair): queued by any thread, taken by the shard when its eventfd fires.
#include "net/sockets.hpp"
#include "shard/shard.hpp"

#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

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
    if (::ioctl(handoff.client_fd, FIONREAD, &queued) != 0 || queued <= 0)
        return;
    std::size_t had = handoff.preamble.size();
    std::size_t want = std::min(static_cast<std::size_t>(queued), kEarlyReadMax);
    handoff.preamble.resize(had + want);
    ssize_t got = ::recv(handoff.client_fd, handoff.preamble.data() + had, want, MSG_DONTWAIT);
    handoff.preamble.resize(had + (got > 0 ? static_cast<std::size_t>(got) : 0));
}

// The stream is cut before it began: the client (and an upstream of the
// application's) see a reset, not an orderly end.
void reset_and_close(const Handoff& handoff) {
    for (int fd : {handoff.client_fd, handoff.upstream_fd}) {
        if (fd >= 0) {
            set_reset_on_close(fd);
            ::close(fd);
        }
    }
}

} // namespace

bool Shard::hand_over(Handoff handoff) {
    {
        std::lock_guard lock(handoff_mu_);
        if (handoffs_closed_)
            return false;
        handoffs_.push_back(std::move(handoff));
    }
    wake();
    return true;
}

void Shard::take_handoffs() {
    std::vector<Handoff> taken;
    {
        std::lock_guard lock(handoff_mu_);
        taken.swap(handoffs_);
    }
    for (Handoff& handoff : taken) {
        ShardRoute* route = nullptr;
        for (auto& each : routes_)
            if (each->route.name == handoff.route)
                route = each.get();
        if (route == nullptr || stopping_) {
            // The route went away in a reconfiguration after forward() checked it.
            log_.warn("a connection handed over for route \"{}\" has no route to go to; "
                      "resetting it",
                      handoff.route);
            reset_and_close(handoff);
            continue;
        }
        if (handoff.upstream_fd >= 0)
            read_what_waits(handoff);
        // Plain fds (the caller's): a unit of the fd limit's connections; an upstream the
        // engine opens goes into a slot with direct descriptors.
        SocketUnits units = take_units(/*plain_fd=*/true, /*slot=*/handoff.upstream_fd < 0);
        // No TCP_NODELAY to set: the caller's thread has set it already
        // (api/handoff.cpp prepare_socket).
        admit(*route, {handoff.client_fd,
                       false,
                       std::move(handoff.preamble),
                       handoff.upstream_fd,
                       false,
                       nullptr,
                       -1,
                       {},
                       {},
                       units});
    }
}

void Shard::refuse_handoffs() {
    std::vector<Handoff> left;
    {
        std::lock_guard lock(handoff_mu_);
        handoffs_closed_ = true;
        left.swap(handoffs_);
    }
    for (const Handoff& handoff : left)
        reset_and_close(handoff);
}

} // namespace uringfwd::engine
