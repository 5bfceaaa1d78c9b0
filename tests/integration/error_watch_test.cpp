// A peer that sent its FIN is no longer read from, yet a reset from it must still reach
// the other side promptly, even while nothing flows the other way.
#include "tests/support/proxy_under_test.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"

#include <gtest/gtest.h>

#include <poll.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstddef>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

TEST(ErrorWatch, ClientResetAfterItsFinReachesAnIdleUpstream) {
    Listener upstream_listener = listen_loopback(Family::Inet4);
    ProxyUnderTest proxy{upstream_listener.endpoint()};

    UniqueFd client = connect_to(proxy.endpoint());
    UniqueFd upstream = accept_one(upstream_listener.fd(), Deadline{5s});
    ASSERT_TRUE(upstream.valid());

    // The client says something and half-closes; the upstream reads it and its EOF.
    ASSERT_EQ(send_text(client.get(), "request", Deadline{5s}).status, IoStatus::Ok);
    shutdown_write(client.get());
    std::array<std::byte, 7> got{};
    ASSERT_EQ(recv_all(upstream.get(), got, Deadline{5s}).status, IoStatus::Ok);
    IoResult eof = recv_until_eof(upstream.get(), Deadline{5s});
    ASSERT_EQ(eof.status, IoStatus::Eof) << to_string(eof.status);

    // The upstream idles (thinking, writing nothing), and the client gives up with a
    // reset. The proxy must reset the upstream's connection too, which the upstream
    // sees as POLLERR without having to write anything.
    abortive_close(client);
    pollfd p{upstream.get(), POLLIN, 0};
    const auto start = Clock::now();
    while (!(p.revents & POLLERR) && Clock::now() - start < 5s) {
        p.revents = 0;
        ::poll(&p, 1, 100);
    }
    EXPECT_TRUE(p.revents & POLLERR) << "no reset reached the idle upstream within 5 s";
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(upstream.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    // EPIPE rather than ECONNRESET: the reset reached a socket that had already
    // received the proxy's FIN (CLOSE_WAIT), net/ipv4/tcp_input.c tcp_reset.
    EXPECT_TRUE(err == EPIPE || err == ECONNRESET) << "SO_ERROR " << err;
}

} // namespace
} // namespace uringfwd::test
