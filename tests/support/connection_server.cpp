#include "tests/support/connection_server.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <cerrno>
#include <system_error>

namespace uringfwd::test {

ConnectionServer::ConnectionServer(Listener listener, Handler handler)
    : listener_(std::move(listener)), handler_(std::move(handler)),
      cancel_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    if (!cancel_) {
        throw std::system_error(errno, std::generic_category(), "eventfd");
    }
    // Non-blocking: a connection reset between poll() and accept() must not stall the
    // acceptor, which has to stay responsive to stop().
    ::fcntl(listener_.fd(), F_SETFL, ::fcntl(listener_.fd(), F_GETFL) | O_NONBLOCK);
    acceptor_ = std::thread([this] { accept_loop(); });
}

ConnectionServer::~ConnectionServer() {
    stop();
}

void ConnectionServer::stop() {
    const uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(cancel_.get(), &one, sizeof(one));
    if (acceptor_.joinable()) {
        acceptor_.join();
    }
    // The acceptor is gone, so the list no longer grows.
    for (Worker& w : workers_) {
        if (w.thread.joinable()) {
            w.thread.join();
        }
    }
    workers_.clear();
}

void ConnectionServer::reap_finished() {
    std::lock_guard lock(workers_mu_);
    for (auto it = workers_.begin(); it != workers_.end();) {
        if (it->finished.load()) {
            it->thread.join();
            it = workers_.erase(it);
        } else {
            ++it;
        }
    }
}

void ConnectionServer::accept_loop() {
    for (;;) {
        pollfd pfds[2] = {{listener_.fd(), POLLIN, 0}, {cancel_.get(), POLLIN, 0}};
        const int n = ::poll(pfds, 2, 1000);
        if (pfds[1].revents & POLLIN) {
            return;
        }
        reap_finished();
        if (n <= 0 || !(pfds[0].revents & POLLIN)) {
            continue;
        }
        UniqueFd conn{::accept4(listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC)};
        if (!conn) {
            continue; // EAGAIN, ECONNABORTED, EMFILE: keep serving
        }
        accepted_.fetch_add(1);
        std::lock_guard lock(workers_mu_);
        Worker& w = workers_.emplace_back();
        w.thread = std::thread([this, &w, fd = conn.release()]() mutable {
            try {
                handler_(UniqueFd{fd}, cancel_.get());
            } catch (...) {
                // A peer's failure shows up in the test's own checks (missing result,
                // connection reset); it must not terminate the test process.
            }
            w.finished.store(true);
        });
    }
}

} // namespace uringfwd::test
