// The options the engine leaves on a connection's sockets, read back from the live
// sockets themselves: the engine runs in this process on plain fds, so its sockets are
// in this process's fd table, found by their addresses.
#include "tests/support/proxy_under_test.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"

#include <gtest/gtest.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <optional>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

int no_delay(int fd) {
    int value = -1;
    socklen_t len = sizeof(value);
    if (::getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &value, &len) != 0)
        return -1;
    return value;
}

TEST(SocketOptions, BothSocketsOfAConnectionHaveNoDelay) {
    // TCP_NODELAY: a forwarder must not add Nagle's delay to small messages. The
    // client's socket gets it from its listener (an accepted socket is a copy of it),
    // the upstream's is set when it is made.
    Listener upstream = listen_loopback(Family::Inet4);
    ProxyUnderTest proxy(upstream.endpoint(), [&](EngineConfig& c) {
        c.placement.shards = 1;
        c.ring.direct_descriptors = DirectDescriptors::Off;
    });

    UniqueFd client = connect_to(proxy.endpoint());
    UniqueFd server_side = accept_one(upstream.fd(), Deadline{5s});
    ASSERT_EQ(send_text(client.get(), "x", Deadline{5s}).status, IoStatus::Ok);

    const std::optional<int> engine_client = fd_connected_to(client.get());
    const std::optional<int> engine_upstream = fd_connected_to(server_side.get());
    ASSERT_TRUE(engine_client.has_value()) << "no socket of the engine's faces the client";
    ASSERT_TRUE(engine_upstream.has_value()) << "no socket of the engine's faces the upstream";
    EXPECT_EQ(no_delay(*engine_client), 1);
    EXPECT_EQ(no_delay(*engine_upstream), 1);
}

} // namespace
} // namespace uringfwd::test
