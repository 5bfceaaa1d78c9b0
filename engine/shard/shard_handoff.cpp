// Connections the application hands over to a running shard (Engine::forward and
// forward_pair): queued by any thread, taken by the shard when its eventfd fires.
#include "net/sockets.hpp"
#include "shard/shard.hpp"

#include <sys/socket.h>
#include <unistd.h>

namespace uringfwd::engine {

namespace {

bool is_tcp_socket(int fd) {
    sockaddr_storage address{};
    socklen_t length = sizeof(address);
    return ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0 &&
           address.ss_family != AF_UNIX;
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
        bool tcp = is_tcp_socket(handoff.client_fd);
        admit(*route, {handoff.client_fd, tcp, std::move(handoff.preamble), handoff.upstream_fd});
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
