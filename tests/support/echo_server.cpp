#include "tests/support/echo_server.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <cerrno>
#include <memory>
#include <system_error>
#include <vector>

namespace uringfwd::test {
namespace {

constexpr std::size_t kBufferSize = 64 * 1024;

struct EchoConn {
    UniqueFd fd;
    std::vector<std::byte> buf = std::vector<std::byte>(kBufferSize);
    std::size_t pending_begin = 0; // bytes [begin, end) still to be written back
    std::size_t pending_end = 0;
    bool eof = false;
    bool closed = false;

    bool has_pending() const { return pending_begin < pending_end; }
};

} // namespace

EchoServer::EchoServer(Family family)
    : listener_(listen_loopback(family)), cancel_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    if (!cancel_) {
        throw std::system_error(errno, std::generic_category(), "eventfd");
    }
    // The loop drains the accept queue until EAGAIN; a blocking listener would stall
    // it in accept().
    ::fcntl(listener_.fd(), F_SETFL, ::fcntl(listener_.fd(), F_GETFL) | O_NONBLOCK);
    thread_ = std::thread([this] { loop(); });
}

EchoServer::~EchoServer() {
    const uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(cancel_.get(), &one, sizeof(one));
    thread_.join();
}

void EchoServer::loop() {
    std::vector<std::unique_ptr<EchoConn>> conns;
    std::vector<pollfd> pfds;
    for (;;) {
        pfds.clear();
        pfds.push_back({cancel_.get(), POLLIN, 0});
        pfds.push_back({listener_.fd(), POLLIN, 0});
        for (auto& c : conns) {
            // Read only when the buffer is empty: echo is strictly back-pressured, the
            // server never holds more than one buffer per connection.
            const short events = c->has_pending() ? POLLOUT : (c->eof ? 0 : POLLIN);
            pfds.push_back({c->fd.get(), events, 0});
        }
        if (::poll(pfds.data(), pfds.size(), 1000) < 0 && errno != EINTR) {
            return;
        }
        if (pfds[0].revents & POLLIN) {
            open_.store(0);
            return; // conns close with the vector
        }
        for (std::size_t i = 0; i < conns.size(); ++i) {
            EchoConn& c = *conns[i];
            const short ev = pfds[i + 2].revents;
            if (ev == 0) {
                continue;
            }
            if (c.has_pending()) {
                const ssize_t n =
                    ::send(c.fd.get(), c.buf.data() + c.pending_begin,
                           c.pending_end - c.pending_begin, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n > 0) {
                    c.pending_begin += static_cast<std::size_t>(n);
                    echoed_.fetch_add(static_cast<uint64_t>(n));
                } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
                    c.closed = true;
                }
            } else if (!c.eof) {
                const ssize_t n = ::recv(c.fd.get(), c.buf.data(), c.buf.size(), MSG_DONTWAIT);
                if (n > 0) {
                    c.pending_begin = 0;
                    c.pending_end = static_cast<std::size_t>(n);
                } else if (n == 0) {
                    c.eof = true;
                } else if (errno != EAGAIN && errno != EINTR) {
                    c.closed = true;
                }
            }
            if (c.eof && !c.has_pending() && !c.closed) {
                // Everything echoed: pass the FIN on, and we are done with it.
                ::shutdown(c.fd.get(), SHUT_WR);
                c.closed = true;
            }
        }
        std::erase_if(conns, [&](const std::unique_ptr<EchoConn>& c) { return c->closed; });
        open_.store(conns.size());
        if (pfds[1].revents & POLLIN) {
            // Drain the backlog in one go so bursts of connects are served promptly.
            for (;;) {
                UniqueFd fd{
                    ::accept4(listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK)};
                if (!fd) {
                    break;
                }
                accepted_.fetch_add(1);
                auto c = std::make_unique<EchoConn>();
                c->fd = std::move(fd);
                conns.push_back(std::move(c));
            }
            open_.store(conns.size());
        }
    }
}

} // namespace uringfwd::test
