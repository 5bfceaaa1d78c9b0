#include "tests/support/echo_load.hpp"

#include "tests/support/payload.hpp"
#include "tests/support/sockets.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <fmt/core.h>
#include <latch>
#include <mutex>
#include <thread>

namespace uringfwd::test {
namespace {

constexpr std::size_t kChunk = 16 * 1024;
constexpr std::size_t kMaxFailures = 10;

struct Conn {
    UniqueFd fd;
    Payload payload{0};
    std::size_t sent = 0;
    std::size_t received = 0;
    bool write_shut = false;
    bool done = false;
};

class Shared {
public:
    void fail(std::string what) {
        std::lock_guard lock(mu_);
        if (result_.failures.size() < kMaxFailures) {
            result_.failures.push_back(std::move(what));
        }
    }
    void add(std::size_t connected, std::size_t verified) {
        std::lock_guard lock(mu_);
        result_.connected += connected;
        result_.verified += verified;
    }
    EchoLoadResult take() { return std::move(result_); }

private:
    std::mutex mu_;
    EchoLoadResult result_;
};

// Returns false when the connection failed (recorded in `shared`).
bool pump(Conn& c, short revents, std::size_t bytes_each, std::size_t index,
          std::vector<std::byte>& buf, std::vector<std::byte>& expect, Shared& shared) {
    if ((revents & POLLOUT) && c.sent < bytes_each) {
        const std::size_t n = std::min(kChunk, bytes_each - c.sent);
        c.payload.fill(c.sent, std::span(buf.data(), n));
        const ssize_t w = ::send(c.fd.get(), buf.data(), n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno != EAGAIN && errno != EINTR) {
            shared.fail(fmt::format("conn {}: send: {}", index, std::strerror(errno)));
            return false;
        }
        if (w > 0) {
            c.sent += static_cast<std::size_t>(w);
        }
    }
    if (c.sent == bytes_each && !c.write_shut) {
        ::shutdown(c.fd.get(), SHUT_WR);
        c.write_shut = true;
    }
    if (revents & (POLLIN | POLLHUP | POLLERR)) {
        const ssize_t r = ::recv(c.fd.get(), buf.data(), kChunk, MSG_DONTWAIT);
        if (r < 0 && errno != EAGAIN && errno != EINTR) {
            shared.fail(fmt::format("conn {}: recv after {} bytes: {}", index, c.received,
                                    std::strerror(errno)));
            return false;
        }
        if (r == 0) {
            if (c.received != bytes_each) {
                shared.fail(fmt::format("conn {}: EOF after {} of {} bytes", index, c.received,
                                        bytes_each));
                return false;
            }
            c.done = true;
        } else if (r > 0) {
            const auto n = static_cast<std::size_t>(r);
            if (c.received + n > bytes_each) {
                shared.fail(fmt::format("conn {}: {} bytes more than sent", index,
                                        c.received + n - bytes_each));
                return false;
            }
            c.payload.fill(c.received, std::span(expect.data(), n));
            if (std::memcmp(buf.data(), expect.data(), n) != 0) {
                shared.fail(fmt::format("conn {}: corrupted echo at offset {}", index, c.received));
                return false;
            }
            c.received += n;
        }
    }
    return true;
}

void run_share(const Endpoint& proxy, std::size_t first, std::size_t count, std::size_t bytes_each,
               const Deadline& deadline, std::latch& all_connected, Shared& shared) {
    std::vector<Conn> conns(count);
    std::size_t connected = 0;
    for (std::size_t i = 0; i < count; ++i) {
        conns[i].payload = Payload{1000 + first + i};
        const int err = try_connect(proxy, milliseconds{5000}, conns[i].fd);
        if (err != 0) {
            shared.fail(fmt::format("conn {}: connect: {}", first + i, std::strerror(err)));
            conns[i].done = true;
            continue;
        }
        ::fcntl(conns[i].fd.get(), F_SETFL, ::fcntl(conns[i].fd.get(), F_GETFL) | O_NONBLOCK);
        ++connected;
    }
    all_connected.arrive_and_wait();

    std::vector<std::byte> buf(kChunk);
    std::vector<std::byte> expect(kChunk);
    std::vector<pollfd> pfds;
    std::vector<std::size_t> index;
    std::size_t verified = 0;
    for (;;) {
        pfds.clear();
        index.clear();
        for (std::size_t i = 0; i < count; ++i) {
            Conn& c = conns[i];
            if (c.done) {
                continue;
            }
            const short events = static_cast<short>(POLLIN | (c.sent < bytes_each ? POLLOUT : 0));
            pfds.push_back({c.fd.get(), events, 0});
            index.push_back(i);
        }
        if (pfds.empty()) {
            break;
        }
        if (deadline.expired()) {
            shared.fail(fmt::format("{} connections unfinished at the deadline", pfds.size()));
            break;
        }
        const int n = ::poll(pfds.data(), pfds.size(), std::min(deadline.poll_timeout_ms(), 100));
        if (n <= 0) {
            continue;
        }
        for (std::size_t k = 0; k < pfds.size(); ++k) {
            if (pfds[k].revents == 0) {
                continue;
            }
            Conn& c = conns[index[k]];
            if (!pump(c, pfds[k].revents, bytes_each, first + index[k], buf, expect, shared)) {
                c.done = true;
                c.fd.reset();
            } else if (c.done) {
                ++verified;
                c.fd.reset();
            }
        }
    }
    shared.add(connected, verified);
}

} // namespace

EchoLoadResult run_echo_load(const Endpoint& proxy, std::size_t connections, std::size_t bytes_each,
                             std::size_t threads, const Deadline& deadline) {
    threads = std::max<std::size_t>(1, std::min(threads, connections));
    Shared shared;
    std::latch all_connected{static_cast<std::ptrdiff_t>(threads)};
    std::vector<std::thread> workers;
    std::size_t first = 0;
    for (std::size_t t = 0; t < threads; ++t) {
        const std::size_t count = connections / threads + (t < connections % threads ? 1 : 0);
        workers.emplace_back([&, first, count] {
            run_share(proxy, first, count, bytes_each, deadline, all_connected, shared);
        });
        first += count;
    }
    for (auto& w : workers) {
        w.join();
    }
    return shared.take();
}

} // namespace uringfwd::test
