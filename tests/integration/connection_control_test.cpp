// Runtime control of open connections over real sockets (Engine::connections(),
// close_connection(), close_connections()): a held connection is listed with the exact
// bytes it moved each way, and closing it resets both the client and the upstream,
// counted and recorded as closed by the operator (CloseReason::Admin).
#include "tests/support/eventually.hpp"
#include "tests/support/named_server.hpp"
#include "tests/support/proxy_under_test.hpp"
#include "tests/support/recording_observer.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <string>
#include <vector>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

// The close reasons the observer was told of.
RouteConfig web_route(std::vector<Endpoint> members) {
    RouteConfig r;
    r.name = "web";
    r.listen = {loopback_any_port()};
    for (const Endpoint& e : members) {
        UpstreamMember m;
        m.address = e;
        r.pool.members.push_back(m);
    }
    return r;
}

// "127.0.0.1:PORT" of the socket's own end.
std::string local_text(int fd) {
    sockaddr_in a{};
    socklen_t len = sizeof(a);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    char host[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &a.sin_addr, host, sizeof(host));
    return std::string(host) + ":" + std::to_string(ntohs(a.sin_port));
}

std::vector<std::byte> bytes(std::size_t n, char fill) {
    return std::vector<std::byte>(n, static_cast<std::byte>(fill));
}

// What a read on a socket the proxy reset sees.
IoStatus read_status(int fd) {
    std::byte one{};
    return recv_all(fd, std::span<std::byte>(&one, 1), Deadline{5s}).status;
}

TEST(ConnectionControl, AHeldConnectionIsListedWithItsBytesAndClosingItResetsBothEnds) {
    Listener upstream = listen_loopback(Family::Inet4);
    auto observer = std::make_shared<RecordingObserver>();
    ProxyUnderTest proxy{{web_route({upstream.endpoint()})},
                         [&](EngineConfig& c) { c.observer = observer; }};

    UniqueFd client = connect_to(proxy.endpoint());
    UniqueFd server = accept_one(upstream.fd(), Deadline{5s});
    ASSERT_TRUE(server);
    std::vector<std::byte> up = bytes(300, 'u');
    std::vector<std::byte> down = bytes(700, 'd');
    ASSERT_EQ(send_all(client.get(), up, Deadline{5s}).status, IoStatus::Ok);
    ASSERT_EQ(recv_all(server.get(), up, Deadline{5s}).status, IoStatus::Ok);
    ASSERT_EQ(send_all(server.get(), down, Deadline{5s}).status, IoStatus::Ok);
    ASSERT_EQ(recv_all(client.get(), down, Deadline{5s}).status, IoStatus::Ok);

    std::vector<OpenConnection> open;
    // A byte is counted once its send has completed, a moment after the peer may see it.
    EXPECT_TRUE(eventually(
        [&] {
            open = proxy.engine().connections();
            return open.size() == 1 && open[0].bytes_to_upstream == 300 &&
                   open[0].bytes_to_client == 700;
        },
        Deadline{5s}));
    ASSERT_EQ(open.size(), 1u);
    const OpenConnection& c = open[0];
    EXPECT_EQ(c.route, "web");
    EXPECT_EQ(c.client, local_text(client.get()));
    EXPECT_EQ(c.member, upstream.endpoint().to_string());
    EXPECT_EQ(c.upstream, upstream.endpoint().to_string());
    EXPECT_EQ(c.phase, "forwarding");
    EXPECT_EQ(c.bytes_to_upstream, 300u);
    EXPECT_EQ(c.bytes_to_client, 700u);
    EXPECT_LT(c.age, 60s);
    EXPECT_LT(c.shard, proxy.engine().info().shards.size());
    EXPECT_EQ(c.id >> 48, c.shard); // the shard that opened it is in its id

    EXPECT_EQ(proxy.engine().connections({"web", upstream.endpoint().to_string(), 0}).size(), 1u);
    EXPECT_TRUE(proxy.engine().connections({"other", "", 0}).empty());
    EXPECT_TRUE(proxy.engine().connections({"web", "10.0.0.9:80", 0}).empty());

    const ChangeResult closed = proxy.engine().close_connection(c.id);
    ASSERT_TRUE(closed.ok) << closed.error;
    EXPECT_EQ(read_status(client.get()), IoStatus::Reset);
    EXPECT_EQ(read_status(server.get()), IoStatus::Reset);
    EXPECT_TRUE(
        eventually([&] { return proxy.stats().closed(CloseReason::Admin) == 1; }, Deadline{5s}));
    EXPECT_TRUE(eventually([&] { return observer->closed().size() == 1; }, Deadline{5s}));
    const std::vector<ConnectionRecord> records = observer->closed();
    ASSERT_EQ(records.size(), 1u);
    EXPECT_EQ(records.front().reason, CloseReason::Admin);
    EXPECT_EQ(to_string(CloseReason::Admin), "admin"); // what the access log writes

    const ChangeResult again = proxy.engine().close_connection(c.id);
    EXPECT_FALSE(again.ok);
    EXPECT_EQ(again.error, "no open connection " + std::to_string(c.id));
    EXPECT_TRUE(proxy.engine().connections().empty());
}

TEST(ConnectionControl, ClosingAMembersConnectionsResetsThoseAlone) {
    NamedServer a{'a'};
    NamedServer b{'b'};
    ProxyUnderTest proxy{{web_route({a.endpoint(), b.endpoint()})}};
    std::vector<UniqueFd> to_a;
    std::vector<UniqueFd> to_b;
    for (int i = 0; i < 40 && (to_a.size() < 2 || to_b.empty()); ++i) {
        UniqueFd fd;
        const std::optional<char> name = name_through(proxy.endpoint(), Deadline{5s}, {}, &fd);
        if (name == 'a' && to_a.size() < 2)
            to_a.push_back(std::move(fd));
        else if (name == 'b' && to_b.empty())
            to_b.push_back(std::move(fd));
    }
    ASSERT_EQ(to_a.size(), 2u);
    ASSERT_EQ(to_b.size(), 1u);
    EXPECT_EQ(proxy.engine().connections({"web", "", 1}).size(), 1u); // the limit

    EXPECT_EQ(proxy.engine().close_connections("web", a.endpoint().to_string()), 2u);
    for (UniqueFd& fd : to_a)
        EXPECT_EQ(read_status(fd.get()), IoStatus::Reset);
    // b's goes on.
    ASSERT_EQ(send_text(to_b[0].get(), "x", Deadline{5s}).status, IoStatus::Ok);
    EXPECT_EQ(read_status(to_b[0].get()), IoStatus::Ok);
    EXPECT_EQ(proxy.engine().close_connections("web"), 1u);
    EXPECT_EQ(read_status(to_b[0].get()), IoStatus::Reset);
    EXPECT_EQ(proxy.engine().close_connections("nope"), 0u);
    EXPECT_EQ(proxy.engine().close_connections(""), 0u);
}

} // namespace
} // namespace uringfwd::test
