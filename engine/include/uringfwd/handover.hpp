// A forwarded connection taken out of its engine so that another one carries it on:
// what an upgrade that keeps its connections passes from the old process to the new
// (docs/handover.md). To the kernel a connection is its two sockets; once no operation
// of the engine's is in flight on them and no byte of the stream is held in a pipe or
// a buffer (what the shard waits for before it detaches one), everything not yet
// forwarded is in the sockets' own queues, and another process that holds the sockets
// (SCM_RIGHTS) goes on exactly where this one stopped.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace uringfwd {

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
    void release_fds() { client_ = upstream_ = -1; }

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
};

// What Engine::end_handover() did with the connections detached and not taken yet.
struct HandoverEnd {
    std::size_t carried_on = 0; // by this engine, to their end
    std::size_t lost = 0;       // could not be (their route is gone): closed
};

} // namespace uringfwd
