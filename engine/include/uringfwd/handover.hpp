// A forwarded connection taken out of its engine so that another one carries it on:
// what an upgrade that keeps its connections passes from the old process to the new
// (docs/handover.md). To the kernel a connection is its two sockets; once no operation
// of the engine's is in flight on them (what the shard waits for before it detaches
// one), everything not yet forwarded is in the sockets' own queues, and another process
// that holds the sockets (SCM_RIGHTS) goes on exactly where this one stopped. Bytes the
// engine had read and the destination had not taken yet wait in a pipe, which goes
// along (UnsentBytes::GoAlong): the one who carries it on delivers them first.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace uringfwd {

// Which way bytes go; an index of DetachedConnection::unsent.
enum class Toward : uint8_t { Upstream = 0, Client = 1 };

// Whether a connection whose engine holds bytes of it the destination has not taken
// (a pipe between its two splices: a destination that reads slowly, or never) may be
// detached with them. Only for whoever passes the pipe on too: the default keeps such a
// connection in its engine until it has delivered them.
enum class UnsentBytes : uint8_t { StayHere, GoAlong };

// The bytes of one direction in a pipe: both its ends (owned by the
// DetachedConnection) and how many it holds; none: read_fd < 0.
struct UnsentPipe {
    int read_fd = -1;
    int write_fd = -1;
    std::size_t bytes = 0;
};

class DetachedConnection {
public:
    DetachedConnection() = default;
    // Takes both fds over.
    DetachedConnection(int client_fd, int upstream_fd)
        : client_(client_fd), upstream_(upstream_fd) {}
    ~DetachedConnection() { close_fds(); }
    DetachedConnection(DetachedConnection&& other) noexcept { *this = std::move(other); }
    DetachedConnection& operator=(DetachedConnection&& other) noexcept {
        if (this != &other) {
            close_fds();
            client_ = std::exchange(other.client_, -1);
            upstream_ = std::exchange(other.upstream_, -1);
            for (int i = 0; i < 2; ++i)
                unsent_[i] = std::exchange(other.unsent_[i], UnsentPipe{});
            route = std::move(other.route);
            member = std::move(other.member);
            bytes_to_upstream = other.bytes_to_upstream;
            bytes_to_client = other.bytes_to_client;
            opened_at = other.opened_at;
            connected_at = other.connected_at;
        }
        return *this;
    }
    DetachedConnection(const DetachedConnection&) = delete;
    DetachedConnection& operator=(const DetachedConnection&) = delete;

    // The sockets, owned by this object (closed with it) until released.
    int client_fd() const { return client_; }
    int upstream_fd() const { return upstream_; }
    // Gives up the sockets and any pipes (their new owner closes them).
    void release_fds() {
        client_ = upstream_ = -1;
        unsent_[0] = unsent_[1] = UnsentPipe{};
    }

    // What the engine holds of a direction, in a pipe, owned by this object from here on.
    void hold_unsent(Toward toward, UnsentPipe pipe);
    const UnsentPipe& unsent(Toward toward) const { return unsent_[static_cast<int>(toward)]; }
    // Gives the pipe of one direction up to a new owner (none left after).
    UnsentPipe take_unsent(Toward toward) {
        return std::exchange(unsent_[static_cast<int>(toward)], UnsentPipe{});
    }
    // Its fds: the two sockets and two per pipe.
    std::size_t fd_count() const {
        return 2 + (unsent_[0].read_fd >= 0 ? 2 : 0) + (unsent_[1].read_fd >= 0 ? 2 : 0);
    }

    std::string route;  // the route's name
    std::string member; // its pool member's name (UpstreamMember::name or address); empty: none
    uint64_t bytes_to_upstream = 0; // forwarded so far
    uint64_t bytes_to_client = 0;
    // When it was accepted, on CLOCK_MONOTONIC (std::chrono::steady_clock on Linux),
    // which every process of one boot shares.
    std::chrono::steady_clock::time_point opened_at{};
    std::chrono::steady_clock::time_point connected_at{}; // its upstream connected

private:
    void close_fds();
    int client_ = -1;
    int upstream_ = -1;
    UnsentPipe unsent_[2];
};

// What Engine::end_handover() did with the connections detached and not taken yet.
struct HandoverEnd {
    std::size_t carried_on = 0; // by this engine, to their end
    std::size_t lost = 0;       // could not be (their route is gone): closed
};

} // namespace uringfwd
