// An echo peer that serves many connections from one thread with poll(): the
// concurrency tests open a thousand connections, and a thread each would crowd the two
// cores the proxy itself needs. Echoes until EOF, flushes, then shuts its write side.
#pragma once

#include "tests/support/sockets.hpp"
#include "tests/support/unique_fd.hpp"

#include <atomic>
#include <cstdint>
#include <thread>

namespace uringfwd::test {

class EchoServer {
public:
    explicit EchoServer(Family family = Family::Inet4);
    ~EchoServer();
    EchoServer(const EchoServer&) = delete;
    EchoServer& operator=(const EchoServer&) = delete;

    const Endpoint& endpoint() const { return listener_.endpoint(); }
    uint64_t accepted() const { return accepted_.load(); }
    uint64_t open_connections() const { return open_.load(); }
    uint64_t bytes_echoed() const { return echoed_.load(); }

private:
    void loop();

    Listener listener_;
    UniqueFd cancel_;
    std::atomic<uint64_t> accepted_{0};
    std::atomic<uint64_t> open_{0};
    std::atomic<uint64_t> echoed_{0};
    std::thread thread_;
};

} // namespace uringfwd::test
