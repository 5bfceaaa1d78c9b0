// Direct descriptors (docs/kernel.md §11) over real sockets: connections live in slots
// of the shard's registered file table while open and give every slot back when they
// close; a shard takes no more connections than its table holds (the next client
// waits in the backlog, with a log line naming the table); the observer still sees the client's
// address (it comes with each accept); forward()/forward_pair() keep the caller's fds
// plain; `off` and wildcard listeners use plain fds.
#include "tests/support/echo_server.hpp"
#include "tests/support/named_server.hpp"
#include "tests/support/proc_stats.hpp"
#include "tests/support/proxy_under_test.hpp"
#include "tests/support/recording_observer.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <span>
#include <string>
#include <vector>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

std::span<const std::byte> bytes_of(const std::string& text) {
    return {reinterpret_cast<const std::byte*>(text.data()), text.size()};
}

// Sends `text` and reads the echo back; whether it all came back intact.
bool echoes(int fd, const std::string& text) {
    if (send_all(fd, bytes_of(text), Deadline{5s}).status != IoStatus::Ok)
        return false;
    std::string got(text.size(), '\0');
    std::span<std::byte> span{reinterpret_cast<std::byte*>(got.data()), got.size()};
    return recv_all(fd, span, Deadline{5s}).status == IoStatus::Ok && got == text;
}

ConfigEdit one_shard(DirectDescriptors mode = DirectDescriptors::Auto) {
    return [mode](EngineConfig& c) {
        c.placement.shards = 1;
        c.ring.direct_descriptors = mode;
    };
}

// Auto chose direct descriptors: this kernel has every piece (6.8 and later).
bool uses_direct(ProxyUnderTest& proxy) {
    return proxy.engine().info().shards.at(0).direct_descriptors;
}

#define SKIP_WITHOUT_DIRECT(proxy)                                                                 \
    if (!uses_direct(proxy))                                                                       \
    GTEST_SKIP() << "this kernel lacks a piece of direct descriptors (see the engine's log)"

bool slots_back_to_zero(ProxyUnderTest& proxy) {
    return eventually([&] { return proxy.stats().active == 0 && proxy.stats().direct_slots == 0; },
                      Deadline{5s});
}

TEST(DirectDescriptors, OpenConnectionsHoldSlotsAndGiveThemAllBack) {
    EchoServer echo;
    ProxyUnderTest proxy{echo.endpoint(), one_shard()};
    SKIP_WITHOUT_DIRECT(proxy);
    {
        std::vector<UniqueFd> clients;
        for (int i = 0; i < 3; ++i) {
            clients.push_back(connect_to(proxy.endpoint()));
            ASSERT_TRUE(echoes(clients.back().get(), "hello " + std::to_string(i)));
        }
        // Each connection: its client and its upstream, both in the table.
        EXPECT_EQ(proxy.stats().direct_slots, 6u);
        // A half-close passes through a slot too (a plain fd installed for a moment).
        shutdown_write(clients[0].get());
        EXPECT_EQ(recv_until_eof(clients[0].get(), Deadline{5s}).status, IoStatus::Eof);
        abortive_close(clients[1]); // and a reset
    }
    EXPECT_TRUE(slots_back_to_zero(proxy)) << "slots in use: " << proxy.stats().direct_slots;
}

// A table of 3 slots holds one connection (two slots each): the next client waits in the
// backlog, neither accepted into the table's last slot nor reset (issue 20: it was reset
// once its upstream socket found no slot), and is served once the first has closed.
TEST(DirectDescriptors, AFullTableHoldsTheNextClientInTheBacklogUntilOneCloses) {
    EchoServer echo;
    ProxyUnderTest proxy(echo.endpoint(), [&](EngineConfig& c) {
        one_shard()(c);
        c.ring.direct_table_size = 3;
    });
    SKIP_WITHOUT_DIRECT(proxy);
    EXPECT_EQ(proxy.engine().connection_room().connections_per_shard, 1u);
    EXPECT_EQ(proxy.engine().info().shards.at(0).direct_slots, 3u);
    EXPECT_EQ(proxy.engine().info().room.connections_per_shard, 1u);
    UniqueFd first = connect_to(proxy.endpoint());
    ASSERT_TRUE(echoes(first.get(), "first"));

    UniqueFd second = connect_to(proxy.endpoint());
    ASSERT_EQ(send_all(second.get(), bytes_of("second"), Deadline{5s}).status, IoStatus::Ok);
    std::vector<std::byte> back(6);
    EXPECT_EQ(recv_all(second.get(), back, Deadline{300ms}).status, IoStatus::Timeout);
    EXPECT_TRUE(proxy.logs("all its 3 slots leave room for", Deadline{5s}));
    EXPECT_EQ(proxy.stats().direct_slots, 2u); // the second is not in the table
    EXPECT_TRUE(echoes(first.get(), "still forwarding"));

    first.reset();
    ASSERT_EQ(recv_all(second.get(), back, Deadline{5s}).status, IoStatus::Ok);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(back.data()), back.size()), "second");
    EXPECT_EQ(proxy.stats().direct_table_full, 0u);
    EXPECT_EQ(proxy.stats().closed_local_error, 0u);
    second.reset();
    EXPECT_TRUE(slots_back_to_zero(proxy));
}

TEST(DirectDescriptors, TheObserverSeesTheAddressesAnAcceptIntoASlotBrings) {
    EchoServer echo;
    auto observer = std::make_shared<RecordingObserver>();
    ProxyUnderTest proxy(echo.endpoint(), [&](EngineConfig& c) {
        one_shard()(c);
        c.observer = observer;
    });
    SKIP_WITHOUT_DIRECT(proxy);
    UniqueFd client = connect_to(proxy.endpoint());
    ASSERT_TRUE(echoes(client.get(), "who am i"));
    sockaddr_in mine{};
    socklen_t len = sizeof(mine);
    ASSERT_EQ(::getsockname(client.get(), reinterpret_cast<sockaddr*>(&mine), &len), 0);
    const std::vector<ConnectionInfo> opened = observer->opened_connections();
    ASSERT_FALSE(opened.empty());
    const Endpoint seen_client = opened.back().client; // this client's, the last opened
    const Endpoint seen_local = opened.back().local;
    EXPECT_EQ(seen_client.host, "127.0.0.1");
    EXPECT_EQ(seen_client.port, ntohs(mine.sin_port));
    EXPECT_EQ(seen_local, proxy.endpoint());
    EXPECT_EQ(proxy.stats().direct_slots, 2u);
}

TEST(DirectDescriptors, HandedOverSocketsStayPlainAndTheEnginesUpstreamGoesDirect) {
    EchoServer echo;
    NamedServer named{'u'};
    RouteConfig web;
    web.name = "web";
    web.listen = {loopback_any_port()};
    web.pool.members = {UpstreamMember{echo.endpoint()}};
    ProxyUnderTest proxy{{web}, one_shard()};
    SKIP_WITHOUT_DIRECT(proxy);
    Listener gateway = listen_loopback(Family::Inet4);

    UniqueFd client = connect_to(gateway.endpoint());
    UniqueFd accepted = accept_one(gateway.fd(), Deadline{5s});
    ASSERT_FALSE(proxy.engine().forward(accepted.get(), "web"));
    (void)accepted.release();
    ASSERT_TRUE(echoes(client.get(), "forwarded"));
    EXPECT_EQ(proxy.stats().direct_slots, 1u); // the upstream the engine opened

    UniqueFd paired = connect_to(gateway.endpoint());
    UniqueFd paired_accepted = accept_one(gateway.fd(), Deadline{5s});
    UniqueFd mine = connect_to(named.endpoint());
    ASSERT_FALSE(proxy.engine().forward_pair(paired_accepted.get(), mine.get(), "web"));
    (void)paired_accepted.release();
    (void)mine.release();
    std::string got(1, '\0');
    ASSERT_EQ(recv_all(paired.get(), std::as_writable_bytes(std::span{got}), Deadline{5s}).status,
              IoStatus::Ok);
    EXPECT_EQ(got, "u");
    EXPECT_EQ(proxy.stats().direct_slots, 1u); // both of the pair's sockets are plain

    client.reset();
    paired.reset();
    EXPECT_TRUE(slots_back_to_zero(proxy));
}

TEST(DirectDescriptors, OffAndWildcardListenersUsePlainFds) {
    EchoServer echo;
    {
        ProxyUnderTest proxy{echo.endpoint(), one_shard(DirectDescriptors::Off)};
        EXPECT_FALSE(uses_direct(proxy));
        EXPECT_EQ(proxy.engine().info().shards.at(0).plain_fds_reason,
                  "direct_descriptors = \"off\"");
        UniqueFd client = connect_to(proxy.endpoint());
        ASSERT_TRUE(echoes(client.get(), "plain"));
        EXPECT_EQ(proxy.stats().direct_slots, 0u);
    }
    ProxyUnderTest proxy(echo.endpoint(), [&](EngineConfig& c) {
        one_shard()(c);
        c.listen = Endpoint::parse("0.0.0.0:0");
    });
    SKIP_WITHOUT_DIRECT(proxy);
    Endpoint to = proxy.endpoint();
    to.host = "127.0.0.1";
    UniqueFd client = connect_to(to);
    ASSERT_TRUE(echoes(client.get(), "wildcard"));
    // Its local address is only getsockname(2)'s to tell: the client stays plain, the
    // upstream goes into the table.
    EXPECT_EQ(proxy.stats().direct_slots, 1u);
}

} // namespace
} // namespace uringfwd::test
