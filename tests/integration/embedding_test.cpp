// The embedding API over real sockets: an observer sees every connection open and
// close with exact byte counts and the right reason; Engine::forward takes over a
// client the application accepted, replaying what it already read first;
// forward_pair takes a pair the application connected; and what the engine cannot
// take is refused with the documented error while the caller keeps its fd.
#include "tests/support/echo_server.hpp"
#include "tests/support/named_server.hpp"
#include "tests/support/proc_stats.hpp"
#include "tests/support/proxy_under_test.hpp"
#include "tests/support/recording_observer.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <span>
#include <string>
#include <vector>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

using Recorder = RecordingObserver;

RouteConfig route(std::string name, const Endpoint& upstream) {
    RouteConfig r;
    r.name = std::move(name);
    r.listen = {loopback_any_port()};
    r.pool.members = {UpstreamMember{upstream}};
    r.pool.connect_timeout = 300ms;
    return r;
}

// The single record once `n` connections have closed.
ConnectionRecord wait_record(const Recorder& recorder, std::size_t n = 1) {
    EXPECT_TRUE(eventually([&] { return recorder.closed().size() >= n; }, Deadline{5s}));
    auto closed = recorder.closed();
    return closed.empty() ? ConnectionRecord{} : closed.back();
}

std::span<const std::byte> bytes_of(const std::string& text) {
    return {reinterpret_cast<const std::byte*>(text.data()), text.size()};
}

std::string read_exactly(int fd, std::size_t n) {
    std::string out(n, '\0');
    std::span<std::byte> span{reinterpret_cast<std::byte*>(out.data()), n};
    EXPECT_EQ(recv_all(fd, span, Deadline{5s}).status, IoStatus::Ok);
    return out;
}

TEST(Embedding, ObserverRecordsExactBytesAndACleanClose) {
    auto recorder = std::make_shared<Recorder>();
    EchoServer echo;
    ProxyUnderTest proxy{{route("web", echo.endpoint())},
                         [&](EngineConfig& c) { c.observer = recorder; }};
    UniqueFd client = connect_to(proxy.endpoint());
    const std::string payload(100000, 'x');
    ASSERT_EQ(send_all(client.get(), bytes_of(payload), Deadline{5s}).status, IoStatus::Ok);
    EXPECT_EQ(read_exactly(client.get(), payload.size()), payload);
    shutdown_write(client.get());
    EXPECT_EQ(recv_until_eof(client.get(), Deadline{5s}).status, IoStatus::Eof);

    const ConnectionRecord r = wait_record(*recorder);
    EXPECT_EQ(recorder->opened(), 1u);
    EXPECT_EQ(r.reason, CloseReason::Clean);
    EXPECT_EQ(r.error, 0);
    EXPECT_EQ(r.bytes_to_upstream, payload.size());
    EXPECT_EQ(r.bytes_to_client, payload.size());
    EXPECT_EQ(r.upstream, echo.endpoint());
    EXPECT_EQ(r.info.local, proxy.endpoint());
    EXPECT_EQ(r.info.client.host, "127.0.0.1");
    EXPECT_GT(r.connect_time.count(), 0);
    EXPECT_GE(r.duration, r.connect_time);
}

TEST(Embedding, ObserverGetsTheCloseReasonAndErrno) {
    auto recorder = std::make_shared<Recorder>();
    const ReservedPort refusing = reserve_refusing_port();
    EchoServer echo;
    RouteConfig idle = route("idle", echo.endpoint());
    idle.idle_timeout = 200ms;
    ProxyUnderTest proxy{{route("refused", refusing.endpoint), idle},
                         [&](EngineConfig& c) { c.observer = recorder; }};

    UniqueFd refused;
    if (try_connect(proxy.endpoint("refused"), 2000ms, refused) == 0)
        recv_until_eof(refused.get(), Deadline{5s});
    ConnectionRecord r = wait_record(*recorder, 1);
    EXPECT_EQ(r.reason, CloseReason::Refused);
    EXPECT_EQ(r.error, ECONNREFUSED);
    EXPECT_EQ(r.upstream, refusing.endpoint); // the member that refused

    UniqueFd quiet = connect_to(proxy.endpoint("idle"));
    EXPECT_EQ(recv_until_eof(quiet.get(), Deadline{5s}).status, IoStatus::Eof);
    r = wait_record(*recorder, 2);
    EXPECT_EQ(r.reason, CloseReason::IdleTimeout);

    UniqueFd reset = connect_to(proxy.endpoint("idle"));
    ASSERT_EQ(send_text(reset.get(), "abc", Deadline{5s}).status, IoStatus::Ok);
    EXPECT_EQ(read_exactly(reset.get(), 3), "abc");
    abortive_close(reset);
    r = wait_record(*recorder, 3);
    EXPECT_EQ(r.reason, CloseReason::ClientReset);
    EXPECT_EQ(r.bytes_to_upstream, 3u);
}

// The application's side of a hand-over: accept on its own socket, read the client's
// first line, and pass the client with whatever came after that line.
struct Gateway {
    Listener listener = listen_loopback(Family::Inet4);
    UniqueFd accept_client() { return accept_one(listener.fd(), Deadline{5s}); }
};

TEST(Embedding, ForwardSendsWhatWasAlreadyReadFirst) {
    EchoServer echo;
    ProxyUnderTest proxy{{route("web", echo.endpoint())}};
    Gateway gateway;
    UniqueFd client = connect_to(gateway.listener.endpoint());
    ASSERT_EQ(send_text(client.get(), "ROUTE web\nfirst-", Deadline{5s}).status, IoStatus::Ok);
    UniqueFd accepted = gateway.accept_client();
    std::string got = read_exactly(accepted.get(), std::strlen("ROUTE web\nfirst-"));
    ASSERT_EQ(got.substr(0, 10), "ROUTE web\n");
    const std::string already = got.substr(10);
    ASSERT_FALSE(proxy.engine().forward(accepted.get(), "web", bytes_of(already)));
    (void)accepted.release(); // the engine owns it now
    ASSERT_EQ(send_text(client.get(), "second", Deadline{5s}).status, IoStatus::Ok);
    EXPECT_EQ(read_exactly(client.get(), std::strlen("first-second")), "first-second");
    EXPECT_EQ(proxy.stats().bytes_to_upstream, std::strlen("first-second"));
}

TEST(Embedding, ForwardPairJoinsTwoSocketsTheApplicationConnected) {
    NamedServer upstream{'u'};
    ProxyUnderTest proxy{{route("web", loopback_any_port())}};
    Gateway gateway;
    UniqueFd client = connect_to(gateway.listener.endpoint());
    UniqueFd accepted = gateway.accept_client();
    UniqueFd mine = connect_to(upstream.endpoint());
    ASSERT_FALSE(proxy.engine().forward_pair(accepted.get(), mine.get(), "web"));
    (void)accepted.release();
    (void)mine.release();
    EXPECT_EQ(read_exactly(client.get(), 1), "u");
    ASSERT_EQ(send_text(client.get(), "ping", Deadline{5s}).status, IoStatus::Ok);
    EXPECT_EQ(read_exactly(client.get(), 4), "ping");
}

TEST(Embedding, WhatCannotBeTakenIsRefusedAndTheCallerKeepsIt) {
    EchoServer echo;
    ProxyUnderTest proxy{{route("web", echo.endpoint())}};
    Gateway gateway;
    UniqueFd client = connect_to(gateway.listener.endpoint());
    UniqueFd accepted = gateway.accept_client();

    EXPECT_EQ(proxy.engine().forward(accepted.get(), "nope"),
              std::make_error_code(std::errc::invalid_argument));
    EXPECT_EQ(proxy.engine().forward(-1, "web"),
              std::make_error_code(std::errc::bad_file_descriptor));
    proxy.engine().stop(0ms);
    EXPECT_EQ(proxy.engine().forward(accepted.get(), "web"),
              std::make_error_code(std::errc::operation_canceled));
    EXPECT_GE(::fcntl(accepted.get(), F_GETFD), 0) << "the caller's fd was closed";
}

TEST(Embedding, SelectorChoosesByClientAddressRejectsAndPointsOutsideThePool) {
    NamedServer a{'a'};
    NamedServer b{'b'};
    NamedServer outside{'o'};
    RouteConfig r = route("web", a.endpoint());
    r.pool.members.push_back(UpstreamMember{b.endpoint()});
    const Endpoint elsewhere = outside.endpoint();
    r.selector = [elsewhere](const ConnectionInfo& info) {
        if (info.client.host == "127.0.0.2")
            return Selection::of_member(1);
        if (info.client.host == "127.0.0.3")
            return Selection::reject();
        if (info.client.host == "127.0.0.4")
            return Selection::of_address(elsewhere);
        return Selection::of_member(0);
    };
    ProxyUnderTest proxy{{r}, [&](EngineConfig& c) { c.placement.shards = 1; }};
    for (int i = 0; i < 4; ++i) { // not round-robin: every time the same
        EXPECT_EQ(name_through(proxy.endpoint(), Deadline{5s}, "127.0.0.1"), 'a');
        EXPECT_EQ(name_through(proxy.endpoint(), Deadline{5s}, "127.0.0.2"), 'b');
        EXPECT_EQ(name_through(proxy.endpoint(), Deadline{5s}, "127.0.0.4"), 'o');
    }
    EXPECT_EQ(name_through(proxy.endpoint(), Deadline{5s}, "127.0.0.3"), std::nullopt);
    EXPECT_TRUE(eventually([&] { return proxy.stats().closed_rejected == 1; }, Deadline{5s}))
        << proxy.stats().to_line();
}

TEST(Embedding, UpdatePoolWhileTrafficFlows) {
    NamedServer a{'a'};
    NamedServer b{'b'};
    ProxyUnderTest proxy{{route("web", a.endpoint())}};
    // A connection to `a` that stays open across the change, echoing.
    UniqueFd held;
    ASSERT_EQ(name_through(proxy.endpoint(), Deadline{5s}, {}, &held), 'a');
    UpstreamPool pool;
    pool.members = {UpstreamMember{b.endpoint()}};
    const ReloadResult r = proxy.engine().update_pool("web", pool);
    ASSERT_TRUE(r.applied) << (r.errors.empty() ? "" : r.errors.front());
    EXPECT_EQ(name_through(proxy.endpoint(), Deadline{5s}), 'b');
    ASSERT_EQ(send_text(held.get(), "still", Deadline{5s}).status, IoStatus::Ok);
    EXPECT_EQ(read_exactly(held.get(), 5), "still");
    EXPECT_FALSE(proxy.engine().update_pool("nope", pool).applied);
}

// forward_pair reads what the client sent before the hand-over at once and sends it
// first (shard_handoff.cpp, read_what_waits): here more than it reads at once, so the
// rest follows through the data path, and the bytes sent after the hand-over after
// that. The engine leaves the sockets non-blocking and with TCP_NODELAY.
TEST(Embedding, ForwardPairSendsWhatTheClientSentBeforeFirstAndInOrder) {
    EchoServer echo;
    ProxyUnderTest proxy{{route("web", loopback_any_port())}};
    Gateway gateway;
    UniqueFd client = connect_to(gateway.listener.endpoint());
    UniqueFd accepted = gateway.accept_client();
    UniqueFd mine = connect_to(echo.endpoint());
    std::string early(40000, '\0');
    for (std::size_t i = 0; i < early.size(); ++i)
        early[i] = static_cast<char>('a' + i % 26);
    ASSERT_EQ(send_text(client.get(), early, Deadline{5s}).status, IoStatus::Ok);
    ASSERT_TRUE(eventually(
        [&] {
            int queued = 0;
            return ::ioctl(accepted.get(), FIONREAD, &queued) == 0 &&
                   queued == static_cast<int>(early.size());
        },
        Deadline{5s}));
    // The same socket, to see how the engine left it (the engine closes its own fd).
    UniqueFd watch{::dup(accepted.get())};
    ASSERT_FALSE(proxy.engine().forward_pair(accepted.get(), mine.get(), "web"));
    (void)accepted.release();
    (void)mine.release();
    ASSERT_EQ(send_text(client.get(), "-late", Deadline{5s}).status, IoStatus::Ok);
    EXPECT_TRUE(read_exactly(client.get(), early.size() + 5) == early + "-late");
    EXPECT_TRUE(eventually([&] { return proxy.stats().bytes_to_upstream == early.size() + 5; },
                           Deadline{5s}));
    EXPECT_NE(::fcntl(watch.get(), F_GETFL) & O_NONBLOCK, 0);
    int nodelay = 0;
    socklen_t len = sizeof(nodelay);
    ASSERT_EQ(::getsockopt(watch.get(), IPPROTO_TCP, TCP_NODELAY, &nodelay, &len), 0);
    EXPECT_EQ(nodelay, 1);
}

// A client that reset before its hand-over: the upstream is reset too, not sent a
// FIN. Reading early must not take the client's error off its socket, where the data
// path finds it.
TEST(Embedding, ForwardPairOfAClientThatResetResetsTheUpstream) {
    auto recorder = std::make_shared<Recorder>();
    ProxyUnderTest proxy{{route("web", loopback_any_port())},
                         [&](EngineConfig& c) { c.observer = recorder; }};
    Gateway gateway;
    Gateway upstream_side;
    UniqueFd client = connect_to(gateway.listener.endpoint());
    UniqueFd accepted = gateway.accept_client();
    abortive_close(client);
    ASSERT_TRUE(eventually(
        [&] {
            pollfd p{accepted.get(), POLLIN, 0};
            return ::poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP)) != 0;
        },
        Deadline{5s}));
    UniqueFd mine = connect_to(upstream_side.listener.endpoint());
    UniqueFd far = upstream_side.accept_client();
    ASSERT_FALSE(proxy.engine().forward_pair(accepted.get(), mine.get(), "web"));
    (void)accepted.release();
    (void)mine.release();
    EXPECT_EQ(recv_until_eof(far.get(), Deadline{5s}).status, IoStatus::Reset);
    EXPECT_EQ(wait_record(*recorder).reason, CloseReason::ClientReset);
}

// Only stream sockets are taken; one that is not TCP (AF_UNIX) is, without TCP_NODELAY.
TEST(Embedding, OnlyStreamSocketsAreTaken) {
    EchoServer echo;
    ProxyUnderTest proxy{{route("web", echo.endpoint())}};
    UniqueFd udp{::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)};
    EXPECT_EQ(proxy.engine().forward(udp.get(), "web"),
              std::make_error_code(std::errc::bad_file_descriptor));
    int ends[2];
    ASSERT_EQ(::pipe2(ends, O_CLOEXEC), 0);
    UniqueFd pipe_read{ends[0]};
    UniqueFd pipe_write{ends[1]};
    EXPECT_EQ(proxy.engine().forward(pipe_read.get(), "web"),
              std::make_error_code(std::errc::bad_file_descriptor));
    EXPECT_GE(::fcntl(udp.get(), F_GETFD), 0) << "the caller's fd was closed";
    EXPECT_GE(::fcntl(pipe_read.get(), F_GETFD), 0) << "the caller's fd was closed";

    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends), 0);
    UniqueFd app{ends[0]};
    UniqueFd handed{ends[1]};
    ASSERT_FALSE(proxy.engine().forward(handed.get(), "web"));
    (void)handed.release();
    ASSERT_EQ(send_text(app.get(), "unix", Deadline{5s}).status, IoStatus::Ok);
    EXPECT_EQ(read_exactly(app.get(), 4), "unix");
}

} // namespace
} // namespace uringfwd::test
