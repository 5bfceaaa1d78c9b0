// PROXY protocol over real sockets (README "PROXY protocol"): send_proxy puts the exact
// header before the stream, accept_proxy takes the client's address from one (in the
// same segment as the first data, or trickled a byte at a time) and forwards the rest
// intact. The suite runs once per data path, so splice and copy are both covered.
#include "protocol/proxy_header.hpp"
#include "tests/support/binary_process.hpp"
#include "tests/support/payload.hpp"
#include "tests/support/proc_stats.hpp"
#include "tests/support/proxy_under_test.hpp"
#include "tests/support/recording_observer.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

RouteConfig route_to(const Endpoint& upstream) {
    RouteConfig r;
    r.name = "pp";
    r.listen = {loopback_any_port()};
    r.pool.members = {UpstreamMember{upstream}};
    return r;
}

uint16_t local_port(int fd) {
    sockaddr_in a{};
    socklen_t n = sizeof(a);
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
    return ntohs(a.sin_port);
}

uint16_t to_endpoint_port(const engine::SocketAddress& a) {
    return a.family() == AF_INET
               ? ntohs(reinterpret_cast<const sockaddr_in*>(&a.storage)->sin_port)
               : ntohs(reinterpret_cast<const sockaddr_in6*>(&a.storage)->sin6_port);
}

std::string as_text(std::span<const std::byte> b) {
    return {reinterpret_cast<const char*>(b.data()), b.size()};
}

// Sends `first` then `payload`, half-closes, and returns everything the upstream got.
std::string relay(Listener& upstream, int client, const std::string& first,
                  const std::vector<std::byte>& payload) {
    EXPECT_EQ(send_text(client, first, Deadline{5s}).status, IoStatus::Ok);
    std::string got;
    std::thread writer([&] {
        send_all(client, payload, Deadline{10s});
        shutdown_write(client);
    });
    UniqueFd in = accept_one(upstream.fd(), Deadline{5s});
    recv_until_eof(in.get(), Deadline{10s},
                   [&](std::span<const std::byte> chunk) { got += as_text(chunk); });
    writer.join();
    return got;
}

// Big enough to go through splice on the splice and auto paths.
constexpr std::size_t kBulk = 512 * 1024;

TEST(ProxyProtocolSend, V1HeaderThenTheIntactStream) {
    Listener upstream = listen_loopback(Family::Inet4);
    RouteConfig r = route_to(upstream.endpoint());
    r.send_proxy = ProxyVersion::V1;
    ProxyUnderTest proxy{{r}};
    UniqueFd client = connect_to(proxy.endpoint());
    const std::vector<std::byte> payload = Payload(11).bytes(0, kBulk);
    std::string got = relay(upstream, client.get(), "", payload);
    std::string header = "PROXY TCP4 127.0.0.1 127.0.0.1 " +
                         std::to_string(local_port(client.get())) + " " +
                         std::to_string(proxy.endpoint().port) + "\r\n";
    ASSERT_GE(got.size(), header.size());
    EXPECT_EQ(got.substr(0, header.size()), header);
    EXPECT_TRUE(got.substr(header.size()) == as_text(payload)) << "stream damaged";
    // The header is the engine's, not the client's: not counted as forwarded.
    EXPECT_TRUE(eventually([&] { return proxy.stats().bytes_to_upstream == kBulk; }, Deadline{5s}))
        << proxy.stats().to_line();
}

TEST(ProxyProtocolSend, V2HeaderPerMemberOverride) {
    Listener upstream = listen_loopback(Family::Inet4);
    RouteConfig r = route_to(upstream.endpoint());
    r.pool.members[0].send_proxy = ProxyVersion::V2; // the route sends none
    ProxyUnderTest proxy{{r}};
    UniqueFd client = connect_to(proxy.endpoint());
    const std::vector<std::byte> payload = Payload(12).bytes(0, kBulk);
    std::string got = relay(upstream, client.get(), "", payload);
    auto bytes = std::as_bytes(std::span(got.data(), got.size()));
    engine::proxy::ParseResult h = engine::proxy::parse(bytes);
    ASSERT_EQ(h.status, engine::proxy::Status::Done) << h.error;
    EXPECT_EQ(h.header.version, engine::proxy::Version::V2);
    EXPECT_EQ(to_endpoint_port(h.header.source), local_port(client.get()));
    EXPECT_EQ(to_endpoint_port(h.header.destination), proxy.endpoint().port);
    EXPECT_TRUE(got.substr(h.consumed) == as_text(payload)) << "stream damaged";
}

TEST(ProxyProtocolAccept, V1InTheSameSegmentAsData) {
    Listener upstream = listen_loopback(Family::Inet4);
    RouteConfig r = route_to(upstream.endpoint());
    r.accept_proxy = true;
    auto recorder = std::make_shared<RecordingObserver>();
    ProxyUnderTest proxy{{r}, [&](EngineConfig& c) { c.observer = recorder; }};
    UniqueFd client = connect_to(proxy.endpoint());
    const std::vector<std::byte> payload = Payload(13).bytes(0, kBulk);
    // One send: the header and the first bytes of the stream arrive together.
    std::string got = relay(upstream, client.get(),
                            "PROXY TCP4 203.0.113.7 198.51.100.1 40001 443\r\nhello ", payload);
    EXPECT_TRUE(got == "hello " + as_text(payload)) << "stream damaged: " << got.size();
    ASSERT_TRUE(eventually([&] { return recorder->opened() > 0; }, Deadline{5s}));
    EXPECT_EQ(recorder->opened_connections()[0].client.to_string(), "203.0.113.7:40001");
}

TEST(ProxyProtocolAccept, V2SplitIntoOneByteWritesAndPassedOnAsV2WithTlvs) {
    Listener upstream = listen_loopback(Family::Inet4);
    RouteConfig r = route_to(upstream.endpoint());
    r.accept_proxy = true;
    r.trusted_sources = {"127.0.0.0/8"};
    r.proxy_tlvs = {engine::proxy::kTlvAuthority};
    r.send_proxy = ProxyVersion::V2;
    ProxyUnderTest proxy{{r}};
    UniqueFd client = connect_to(proxy.endpoint());
    int one = 1;
    setsockopt(client.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    // A v2 header from [2001:db8::7]:5555 with an AUTHORITY and an ALPN TLV.
    engine::SocketAddress s, d;
    auto* s6 = reinterpret_cast<sockaddr_in6*>(&s.storage);
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons(5555);
    inet_pton(AF_INET6, "2001:db8::7", &s6->sin6_addr);
    s.length = sizeof(sockaddr_in6);
    d = s;
    reinterpret_cast<sockaddr_in6*>(&d.storage)->sin6_port = htons(443);
    std::vector<std::byte> tlvs;
    std::string authority = "a.example";
    std::string alpn = "h2";
    engine::proxy::append_tlv(tlvs, engine::proxy::kTlvAuthority,
                              std::as_bytes(std::span(authority.data(), authority.size())));
    engine::proxy::append_tlv(tlvs, engine::proxy::kTlvAlpn,
                              std::as_bytes(std::span(alpn.data(), alpn.size())));
    std::vector<std::byte> header;
    engine::proxy::write_v2(header, &s, &d, tlvs);
    for (std::byte b : header) { // one segment per byte
        ASSERT_EQ(send_all(client.get(), std::span(&b, 1), Deadline{5s}).status, IoStatus::Ok);
        std::this_thread::sleep_for(1ms);
    }
    const std::vector<std::byte> payload = Payload(14).bytes(0, 64 * 1024);
    std::string got = relay(upstream, client.get(), "", payload);
    auto bytes = std::as_bytes(std::span(got.data(), got.size()));
    engine::proxy::ParseResult h = engine::proxy::parse(bytes);
    ASSERT_EQ(h.status, engine::proxy::Status::Done) << h.error;
    EXPECT_EQ(to_endpoint_port(h.header.source), 5555);
    EXPECT_EQ(to_endpoint_port(h.header.destination), 443);
    // Only the configured TLV is passed on.
    ASSERT_EQ(h.header.tlvs.size(), 1u);
    EXPECT_EQ(h.header.tlvs[0].type, engine::proxy::kTlvAuthority);
    EXPECT_EQ(as_text(h.header.tlvs[0].value), authority);
    EXPECT_TRUE(got.substr(h.consumed) == as_text(payload)) << "stream damaged";
}

// Engine::forward: the route's header goes first, then what the application had read,
// then the rest of the stream. forward_pair sends none (its upstream is the caller's).
TEST(ProxyProtocolSend, ForwardSendsTheHeaderBeforeAlreadyReadAndForwardPairNone) {
    Listener upstream = listen_loopback(Family::Inet4);
    RouteConfig r = route_to(upstream.endpoint());
    r.send_proxy = ProxyVersion::V1;
    ProxyUnderTest proxy{{r}};
    Listener gateway = listen_loopback(Family::Inet4);
    UniqueFd client = connect_to(gateway.endpoint());
    UniqueFd accepted = accept_one(gateway.fd(), Deadline{5s});
    const std::string already = "read-by-the-app:";
    ASSERT_FALSE(proxy.engine().forward(accepted.get(), "pp",
                                        std::as_bytes(std::span(already.data(), already.size()))));
    (void)accepted.release(); // the engine owns it now
    const std::vector<std::byte> payload = Payload(16).bytes(0, 4096);
    std::string got = relay(upstream, client.get(), "", payload);
    std::string header = "PROXY TCP4 127.0.0.1 127.0.0.1 " +
                         std::to_string(local_port(client.get())) + " " +
                         std::to_string(gateway.endpoint().port) + "\r\n";
    EXPECT_TRUE(got == header + already + as_text(payload)) << got.substr(0, 80);

    UniqueFd client2 = connect_to(gateway.endpoint());
    UniqueFd accepted2 = accept_one(gateway.fd(), Deadline{5s});
    UniqueFd mine = connect_to(upstream.endpoint());
    UniqueFd theirs = accept_one(upstream.fd(), Deadline{5s});
    ASSERT_FALSE(proxy.engine().forward_pair(accepted2.get(), mine.get(), "pp"));
    (void)accepted2.release();
    (void)mine.release();
    ASSERT_EQ(send_text(client2.get(), "pair", Deadline{5s}).status, IoStatus::Ok);
    shutdown_write(client2.get());
    std::string pair;
    recv_until_eof(theirs.get(), Deadline{5s},
                   [&](std::span<const std::byte> chunk) { pair += as_text(chunk); });
    EXPECT_EQ(pair, "pair");
}

// The one-route command line: --accept-proxy with --trusted-sources, --send-proxy.
TEST(ProxyProtocolCli, FlagsAcceptAndSend) {
    Listener upstream = listen_loopback(Family::Inet4);
    RunningBinary binary = start_binary("127.0.0.1:0", upstream.endpoint(),
                                        {"--accept-proxy", "--trusted-sources", "127.0.0.0/8,::1",
                                         "--send-proxy", "v1", "--inspect-timeout", "2s"});
    UniqueFd client = connect_to(binary.endpoint);
    const std::vector<std::byte> payload = Payload(15).bytes(0, 4096);
    std::string got =
        relay(upstream, client.get(), "PROXY TCP4 198.51.100.9 192.0.2.1 6000 443\r\n", payload);
    EXPECT_TRUE(got == "PROXY TCP4 198.51.100.9 192.0.2.1 6000 443\r\n" + as_text(payload))
        << got.substr(0, 80);
}

} // namespace
} // namespace uringfwd::test
