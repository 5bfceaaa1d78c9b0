// Routing TLS by server name over real sockets: routes sharing one listen address, told
// apart by the ClientHello (real ones from the fuzz seed corpus: openssl s_client, curl,
// gnutls-cli). Upstreams are NamedServers: each says its name, then echoes, so a test
// sees where a client landed and that the hello reached it byte for byte (replayed).
#include "tests/support/binary_process.hpp"
#include "tests/support/named_server.hpp"
#include "tests/support/proc_stats.hpp"
#include "tests/support/proxy_under_test.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/temp_config_file.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#ifndef URING_FWD_HELLO_CORPUS
#error "URING_FWD_HELLO_CORPUS must name tests/fuzz/corpus/client_hello (tests/meson.build)"
#endif

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;
using Bytes = std::vector<std::byte>;

Bytes seed(const std::string& name) {
    std::ifstream in(std::filesystem::path(URING_FWD_HELLO_CORPUS) / name, std::ios::binary);
    std::vector<char> raw((std::istreambuf_iterator<char>(in)), {});
    Bytes out(raw.size());
    std::memcpy(out.data(), raw.data(), raw.size());
    if (out.empty())
        throw std::runtime_error("missing seed " + name);
    return out;
}

// A one-record hello re-cut into records of `fragment` bytes (RFC 8446 §5.1 allows a
// handshake message to span records; large post-quantum hellos do).
Bytes in_records(const Bytes& one_record, std::size_t fragment) {
    Bytes out;
    for (std::size_t at = 5; at < one_record.size(); at += fragment) {
        std::size_t n = std::min(fragment, one_record.size() - at);
        out.insert(out.end(), {std::byte{22}, one_record[1], one_record[2],
                               static_cast<std::byte>(n >> 8), static_cast<std::byte>(n & 0xff)});
        out.insert(out.end(), one_record.begin() + static_cast<std::ptrdiff_t>(at),
                   one_record.begin() + static_cast<std::ptrdiff_t>(at + n));
    }
    return out;
}

Bytes text(std::string_view s) {
    Bytes out(s.size());
    std::memcpy(out.data(), s.data(), s.size());
    return out;
}

RouteConfig route(std::string name, const Endpoint& listen, const Endpoint& upstream,
                  std::vector<std::string> server_names = {}, std::vector<std::string> alpn = {}) {
    RouteConfig r;
    r.name = std::move(name);
    r.listen = {listen};
    r.pool.members = {UpstreamMember{upstream}};
    r.pool.connect_timeout = 2000ms;
    r.server_names = std::move(server_names);
    r.alpn = std::move(alpn);
    r.inspect_timeout = 2000ms;
    return r;
}

struct Landing {
    char upstream = '?';
    bool echoed = false; // the upstream got the first bytes intact
};

// Connects, sends `first` in writes of `step` bytes (0: one write), and reads the name
// of the upstream it reached and the echo of `first`.
Landing send_through(const Endpoint& to, const Bytes& first, std::size_t step = 0) {
    UniqueFd fd = connect_to(to);
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    const Deadline deadline{5s};
    std::size_t chunk = step == 0 ? first.size() : step;
    for (std::size_t at = 0; at < first.size(); at += chunk) {
        std::span<const std::byte> piece(first.data() + at, std::min(chunk, first.size() - at));
        if (send_all(fd.get(), piece, deadline).status != IoStatus::Ok)
            return {};
        if (step != 0 && at % 64 == 0)
            std::this_thread::sleep_for(1ms); // separate segments, not one coalesced write
    }
    Bytes back(1 + first.size());
    IoResult r = recv_all(fd.get(), back, deadline);
    if (r.bytes == 0)
        return {};
    Landing out;
    out.upstream = static_cast<char>(back[0]);
    out.echoed =
        r.status == IoStatus::Ok && std::equal(first.begin(), first.end(), back.begin() + 1);
    return out;
}

// The engine reset or closed the client without a byte from any upstream.
bool refused_quietly(const Endpoint& to, const Bytes& first, const Deadline& deadline) {
    UniqueFd fd = connect_to(to);
    if (!first.empty())
        send_all(fd.get(), first, deadline);
    std::byte b{};
    IoResult r = recv_all(fd.get(), std::span(&b, 1), deadline);
    return r.ended_by_peer() && r.bytes == 0;
}

class SniRouting : public ::testing::Test {
protected:
    SniRouting()
        : shared_(Endpoint::parse(fmt::format("127.0.0.1:{}", free_port()))),
          proxy_({route("fallback", shared_, d_.endpoint()),
                  route("a", shared_, a_.endpoint(), {"a.example"}),
                  route("b", shared_, b_.endpoint(), {"*.b.example", "b.example"}, {"h2"}),
                  route("plain", loopback_any_port(), p_.endpoint())}) {}

    NamedServer d_{'d'}, a_{'a'}, b_{'b'}, p_{'p'};
    Endpoint shared_;
    ProxyUnderTest proxy_;
};

TEST_F(SniRouting, RealClientHellosLandOnTheirRoute) {
    struct Case {
        const char* seed;
        char upstream;
    };
    const Case cases[] = {
        {"openssl-sni-a", 'a'},   {"openssl-nosni", 'd'}, // no SNI: the default
        {"openssl-alpn", 'b'},                            // b.example with h2
        {"openssl-tls12", 'd'},                           // c.example: no route
        {"curl-sni", 'a'},        {"curl-http11", 'd'},   // b.example without h2
        {"gnutls-sni-alpn", 'a'}, {"gnutls-nosni", 'd'},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.seed);
        Landing l = send_through(shared_, seed(c.seed));
        EXPECT_EQ(l.upstream, c.upstream);
        EXPECT_TRUE(l.echoed) << "the hello must reach the upstream intact";
    }
}

TEST_F(SniRouting, OneByteWritesAndManyRecordsStillRoute) {
    Bytes hello = seed("openssl-sni-a");
    Landing slow = send_through(shared_, hello, 1);
    EXPECT_EQ(slow.upstream, 'a');
    EXPECT_TRUE(slow.echoed);
    // The same hello in 40-byte records, also a byte at a time.
    Landing split = send_through(shared_, in_records(hello, 40), 1);
    EXPECT_EQ(split.upstream, 'a');
    EXPECT_TRUE(split.echoed);
}

TEST_F(SniRouting, NotTlsGoesToTheDefaultAndAPlainListenerIsNotDelayed) {
    Landing http = send_through(shared_, text("GET / HTTP/1.0\r\n\r\n"));
    EXPECT_EQ(http.upstream, 'd');
    EXPECT_TRUE(http.echoed);
    // Server speaks first on the plain route: its name comes without a client byte,
    // long before the 2 s inspect_timeout.
    auto started = std::chrono::steady_clock::now();
    EXPECT_EQ(name_through(proxy_.endpoint("plain"), Deadline{1s}), 'p');
    EXPECT_LT(std::chrono::steady_clock::now() - started, 1s);
}

TEST(SniRoutingTimeout, ASilentClientHitsTheInspectTimeout) {
    NamedServer d{'d'}, a{'a'};
    const Endpoint shared = Endpoint::parse(fmt::format("127.0.0.1:{}", free_port()));
    RouteConfig fallback = route("fallback", shared, d.endpoint());
    fallback.inspect_timeout = 300ms; // the default route's: its listener reads the hello
    ProxyUnderTest proxy({fallback, route("a", shared, a.endpoint(), {"a.example"})});
    auto started = std::chrono::steady_clock::now();
    EXPECT_TRUE(refused_quietly(shared, {}, Deadline{5s}));
    auto took = std::chrono::steady_clock::now() - started;
    EXPECT_GE(took, 250ms);
    EXPECT_LT(took, 3s);
    EXPECT_TRUE(eventually([&] { return proxy.stats().closed(CloseReason::InspectTimeout) == 1; },
                           Deadline{2s}));
    EXPECT_EQ(d.accepted() + a.accepted(), 0u);
}

// Each bad ClientHello and the outcome the README documents; the engine serves on.
TEST_F(SniRouting, BadClientHellosEndAsDocumented) {
    Bytes good = seed("openssl-sni-a");
    auto with = [&](std::size_t at, uint8_t value) {
        Bytes b = good;
        b[at] = static_cast<std::byte>(value);
        return b;
    };
    Bytes truncated(good.begin(), good.begin() + 100);
    Bytes garbage(200, std::byte{0x5a});
    garbage[0] = std::byte{22};
    // A handshake length of 20000: more than the 16 KiB the engine reads.
    Bytes oversized = with(6, 0x00);
    oversized[7] = std::byte{0x4e};
    oversized[8] = std::byte{0x20};
    struct Case {
        const char* what;
        Bytes bytes;
        bool close_after; // the client closes its side after sending
        CloseReason reason;
    };
    const std::vector<Case> cases = {
        {"truncated, then EOF", truncated, true, CloseReason::InspectIncomplete},
        {"record version 2.x", with(1, 2), false, CloseReason::TlsMalformed},
        {"hello version 4.3", with(9, 4), false, CloseReason::TlsMalformed},
        {"garbage after a handshake byte", garbage, false, CloseReason::TlsMalformed},
        {"server hello", with(5, 2), false, CloseReason::TlsMalformed},
        {"larger than 16 KiB", oversized, false, CloseReason::InspectOversized},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.what);
        UniqueFd fd = connect_to(shared_);
        const Deadline deadline{5s};
        send_all(fd.get(), c.bytes, deadline);
        if (c.close_after)
            ::shutdown(fd.get(), SHUT_WR);
        std::byte b{};
        IoResult r = recv_all(fd.get(), std::span(&b, 1), deadline);
        EXPECT_TRUE(r.ended_by_peer()) << to_string(r.status);
        EXPECT_EQ(r.bytes, 0u);
        EXPECT_TRUE(eventually([&] { return proxy_.stats().closed(c.reason) >= 1; }, Deadline{3s}))
            << proxy_.stats().to_line();
    }
    EXPECT_EQ(d_.accepted() + a_.accepted() + b_.accepted(), 0u);
    // And it still serves.
    EXPECT_EQ(send_through(shared_, good).upstream, 'a');
}

TEST(SniRoutingNoDefault, NoMatchIsReset) {
    NamedServer a{'a'};
    ProxyUnderTest proxy({route("a", loopback_any_port(), a.endpoint(), {"a.example"})});
    EXPECT_EQ(send_through(proxy.endpoint(), seed("openssl-sni-a")).upstream, 'a');
    EXPECT_TRUE(refused_quietly(proxy.endpoint(), seed("openssl-alpn"), Deadline{5s}));
    EXPECT_TRUE(refused_quietly(proxy.endpoint(), text("hello"), Deadline{5s}));
    EXPECT_TRUE(
        eventually([&] { return proxy.stats().closed(CloseReason::NoRoute) == 2; }, Deadline{3s}));
}

// A running engine gains and loses SNI routes on an address it keeps listening on.
TEST(SniRoutingReload, RoutesJoinAndLeaveASharedAddress) {
    NamedServer d{'d'}, a{'a'};
    const Endpoint shared = Endpoint::parse(fmt::format("127.0.0.1:{}", free_port()));
    ProxyUnderTest proxy({route("fallback", shared, d.endpoint())});
    Bytes hello = seed("openssl-sni-a");
    EXPECT_EQ(send_through(shared, hello).upstream, 'd');

    EngineConfig next = proxy.config();
    next.routes.push_back(route("a", shared, a.endpoint(), {"a.example"}));
    ReloadResult r = proxy.engine().reconfigure(next);
    ASSERT_TRUE(r.applied) << (r.errors.empty() ? "" : r.errors.front());
    EXPECT_EQ(send_through(shared, hello).upstream, 'a');
    EXPECT_EQ(send_through(shared, seed("openssl-nosni")).upstream, 'd');

    // An ambiguous change is refused, and nothing changes.
    EngineConfig bad = next;
    bad.routes.push_back(route("a2", shared, a.endpoint(), {"A.example"}));
    r = proxy.engine().reconfigure(bad);
    EXPECT_FALSE(r.applied);
    ASSERT_FALSE(r.errors.empty());
    EXPECT_NE(r.errors.front().find("a client could go to either"), std::string::npos)
        << r.errors.front();
    EXPECT_EQ(send_through(shared, hello).upstream, 'a');

    r = proxy.engine().reconfigure(proxy.config());
    ASSERT_TRUE(r.applied);
    EXPECT_EQ(send_through(shared, hello).upstream, 'd');
    // Without SNI rules again, a server-speaks-first client is not held.
    EXPECT_EQ(name_through(shared, Deadline{1s}), 'd');
}

// The binary: server_names from a file, changed by SIGHUP on a shared Unix address (kept
// listening), and an ambiguous file refused with the line that makes it so.
TEST(SniRoutingSighup, ServerNamesChangeOnReload) {
    NamedServer d{'d'}, a{'a'};
    const std::string socket = unique_unix_path("sni");
    const Endpoint at = Endpoint::parse("unix:" + socket);
    auto file_text = [&](const std::string& names_of_a, const std::string& names_of_d) {
        return fmt::format("[engine]\nshards = 1\n"
                           "[[route]]\nname = \"d\"\nlisten = \"unix:{}\"\n{}"
                           "  [[route.upstream]]\n  address = \"{}\"\n"
                           "[[route]]\nname = \"a\"\nlisten = \"unix:{}\"\n"
                           "server_names = [{}]\n"
                           "  [[route.upstream]]\n  address = \"{}\"\n",
                           socket, names_of_d, d.endpoint().to_string(), socket, names_of_a,
                           a.endpoint().to_string());
    };
    const ConfigFile file{file_text("\"a.example\"", "")};
    BinaryProcess fwd{uring_fwd_binary(), {"--config", file.path()}};
    ASSERT_TRUE(fwd.wait_listening(Deadline{10s}).has_value()) << fwd.stderr_text();
    EXPECT_EQ(send_through(at, seed("openssl-sni-a")).upstream, 'a');
    EXPECT_EQ(send_through(at, seed("openssl-alpn")).upstream, 'd'); // b.example

    file.write(file_text("\"b.example\"", ""));
    fwd.signal(SIGHUP);
    ASSERT_TRUE(
        eventually([&] { return fwd.stderr_text().find("SIGHUP: reloaded") != std::string::npos; },
                   Deadline{5s}))
        << fwd.stderr_text();
    EXPECT_EQ(send_through(at, seed("openssl-sni-a")).upstream, 'd');
    EXPECT_EQ(send_through(at, seed("openssl-alpn")).upstream, 'a');

    // Route d takes b.example too: one name in two routes of one address.
    file.write(file_text("\"b.example\"", "server_names = [\"B.example\"]\n"));
    fwd.signal(SIGHUP);
    ASSERT_TRUE(eventually(
        [&] { return fwd.stderr_text().find("still serving") != std::string::npos; }, Deadline{5s}))
        << fwd.stderr_text();
    EXPECT_NE(fwd.stderr_text().find("a client could go to either"), std::string::npos)
        << fwd.stderr_text();
    EXPECT_EQ(send_through(at, seed("openssl-alpn")).upstream, 'a');
}

} // namespace
} // namespace uringfwd::test
