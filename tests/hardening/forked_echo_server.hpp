// An echo upstream in a child process of its own: it can be SIGKILLed mid-transfer like
// a crashing server, and its sockets do not count against the test process's fd limit
// (the idle-at-scale test needs 9000 of them on each side). One epoll loop; echoes what
// it reads and closes a connection at EOF or on error.
#pragma once

#include "tests/support/sockets.hpp"

#include <sys/types.h>

#include <atomic>
#include <cstdint>

namespace uringfwd::test {

class ForkedEchoServer {
public:
    // Serves TCP `listener` (its fd moves to the child; the parent keeps no copy, so
    // once the child dies nobody accepts on it).
    explicit ForkedEchoServer(Listener listener);
    ~ForkedEchoServer(); // kills and reaps the child
    ForkedEchoServer(const ForkedEchoServer&) = delete;
    ForkedEchoServer& operator=(const ForkedEchoServer&) = delete;

    const Endpoint& endpoint() const { return endpoint_; }
    pid_t pid() const { return pid_; }
    // Counters the child keeps in memory shared with the parent.
    uint64_t accepted() const;
    uint64_t open_connections() const;

    // SIGKILL now and reap: its sockets close the way a crashed server's do.
    void kill();

private:
    struct Shared {
        std::atomic<uint64_t> accepted{0};
        std::atomic<uint64_t> open{0};
    };

    Endpoint endpoint_;
    Shared* shared_ = nullptr;
    pid_t pid_ = -1;
};

} // namespace uringfwd::test
