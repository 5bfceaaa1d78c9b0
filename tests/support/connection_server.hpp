// Accepts connections on its own thread and runs a handler per connection on a thread
// of its own. Destruction stops accepting, raises the cancel fd every handler polls,
// and joins all threads: a failing test can never leave a peer thread behind.
#pragma once

#include "tests/support/sockets.hpp"
#include "tests/support/unique_fd.hpp"

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <thread>

namespace uringfwd::test {

class ConnectionServer {
public:
    // `cancel_fd` becomes readable when the server stops; handlers must poll it (or
    // bound every wait some other way) and return soon after.
    using Handler = std::function<void(UniqueFd conn, int cancel_fd)>;

    ConnectionServer(Listener listener, Handler handler);
    ~ConnectionServer();
    ConnectionServer(const ConnectionServer&) = delete;
    ConnectionServer& operator=(const ConnectionServer&) = delete;

    const Endpoint& endpoint() const { return listener_.endpoint(); }
    uint64_t accepted() const { return accepted_.load(); }
    int cancel_fd() const { return cancel_.get(); }

    // Idempotent; also run by the destructor.
    void stop();

private:
    struct Worker {
        std::thread thread;
        std::atomic<bool> finished{false};
    };

    void accept_loop();
    void reap_finished();

    Listener listener_;
    Handler handler_;
    UniqueFd cancel_;
    std::atomic<uint64_t> accepted_{0};
    std::mutex workers_mu_;
    std::list<Worker> workers_;
    std::thread acceptor_;
};

} // namespace uringfwd::test
