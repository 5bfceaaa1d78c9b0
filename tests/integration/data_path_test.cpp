// The two data paths and the switch between them: what each one really does (read off
// the engine's counters), that bytes stay intact and in order across a switch, and
// that copy buffers are shared fairly and always come back.
#include "tests/support/echo_load.hpp"
#include "tests/support/echo_server.hpp"
#include "tests/support/payload.hpp"
#include "tests/support/proc_stats.hpp"
#include "tests/support/proxy_under_test.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

constexpr std::size_t kMiB = 1024 * 1024;

// copy_buffers 0: the engine's default.
ConfigEdit with_path(DataPath path, unsigned copy_buffers = 0) {
    return [path, copy_buffers](EngineConfig& c) {
        c.data_path = path;
        if (copy_buffers != 0)
            c.copy.copy_buffers = copy_buffers;
    };
}

// Request/response over one connection: `rounds` messages of `size` bytes, each echoed
// back and compared before the next is sent.
void ping_pong(int fd, std::size_t size, int rounds, uint64_t seed) {
    for (int i = 0; i < rounds; ++i) {
        std::vector<std::byte> message = Payload{seed}.bytes(static_cast<uint64_t>(i) * size, size);
        ASSERT_EQ(send_all(fd, message, Deadline{5s}).status, IoStatus::Ok) << "round " << i;
        std::vector<std::byte> echo(size);
        ASSERT_EQ(recv_all(fd, echo, Deadline{5s}).status, IoStatus::Ok) << "round " << i;
        ASSERT_EQ(echo, message) << "round " << i;
    }
}

// Sends `size` bytes from another thread while this one reads the echo and compares.
void bulk_echo(int fd, std::size_t size, uint64_t seed) {
    std::vector<std::byte> data = Payload{seed}.bytes(0, size);
    IoResult sent{};
    std::thread sender([&] { sent = send_all(fd, data, Deadline{30s}); });
    std::vector<std::byte> echo(size);
    IoResult got = recv_all(fd, echo, Deadline{30s});
    sender.join();
    ASSERT_EQ(sent.status, IoStatus::Ok);
    ASSERT_EQ(got.status, IoStatus::Ok) << "after " << got.bytes << " bytes";
    ASSERT_TRUE(echo == data) << "bulk echo differs";
}

// `connections` clients at once through the proxy to an echo server, each checking
// its `bytes` come back intact.
::testing::AssertionResult all_echoed(ProxyUnderTest& proxy, std::size_t connections,
                                      std::size_t bytes) {
    EchoLoadResult load = run_echo_load(proxy.endpoint(), connections, bytes, 2, Deadline{60s});
    if (load.verified == connections)
        return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << load.verified << " of " << connections << " echoed intact; first failure: "
           << (load.failures.empty() ? "none recorded" : load.failures.front());
}

// Once every connection is gone, nothing is held: no connection, buffer or pipe.
::testing::AssertionResult settles(ProxyUnderTest& proxy) {
    auto settled = [&] {
        EngineStats s = proxy.stats();
        return s.active == 0 && s.buffers_out == 0 && s.pipes_leased == 0;
    };
    if (eventually(settled, Deadline{5s}))
        return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "still held after 5 s: " << proxy.stats().to_line();
}

TEST(DataPath, CopyForwardsInlineWithoutSplicingOrKernelThreads) {
    EchoServer echo;
    ProxyUnderTest proxy{echo.endpoint(), with_path(DataPath::Copy)};

    ASSERT_TRUE(all_echoed(proxy, 8, kMiB));

    EngineStats s = proxy.stats();
    EXPECT_EQ(s.splices, 0u);
    EXPECT_EQ(s.pipes_created, 0u);
    EXPECT_GT(s.copy_receives, 0u);
    EXPECT_GE(s.copy_sends, s.copy_receives); // a short send adds one
    EXPECT_EQ(s.bytes_to_upstream, 8 * kMiB);
    EXPECT_EQ(s.bytes_to_client, 8 * kMiB);
    // Receives and sends ran inline: no io-wq worker was ever needed.
    EXPECT_EQ(s.iowq_threads, 0u);
    EXPECT_TRUE(settles(proxy));
}

TEST(DataPath, SpliceNeverCopies) {
    EchoServer echo;
    ProxyUnderTest proxy{echo.endpoint(), with_path(DataPath::Splice)};

    ASSERT_TRUE(all_echoed(proxy, 4, kMiB));

    EngineStats s = proxy.stats();
    EXPECT_GT(s.splices, 0u);
    EXPECT_EQ(s.copy_receives, 0u);
    EXPECT_EQ(s.copy_sends, 0u);
    EXPECT_EQ(s.bytes_to_upstream, 4 * kMiB);
}

// One connection that chats, then pushes bulk, then chats again: auto copies the chat,
// splices the bulk and goes back to copying, and the echo is intact all along.
TEST(DataPath, AutoCopiesSmallMessagesSplicesBulkAndSwitchesBack) {
    EchoServer echo;
    ProxyUnderTest proxy{echo.endpoint(), with_path(DataPath::Auto)};
    UniqueFd client = connect_to(proxy.endpoint());

    ping_pong(client.get(), 64, 100, 1);
    EngineStats chat = proxy.stats();
    EXPECT_EQ(chat.splices, 0u) << chat.to_line();
    EXPECT_GE(chat.copy_receives, 200u) << chat.to_line(); // 100 each way
    EXPECT_EQ(chat.switches_to_splice, 0u);

    bulk_echo(client.get(), 32 * kMiB, 2);
    EngineStats bulk = proxy.stats();
    EXPECT_GE(bulk.switches_to_splice, 1u) << bulk.to_line();
    EXPECT_GT(bulk.splices, 0u) << bulk.to_line();

    ping_pong(client.get(), 64, 100, 3);
    EngineStats after = proxy.stats();
    EXPECT_GE(after.switches_to_copy, 1u) << after.to_line();
    // Most of the second chat went through the copy path again.
    EXPECT_GE(after.copy_receives - bulk.copy_receives, 150u) << after.to_line();

    client.reset();
    EXPECT_TRUE(settles(proxy));
}

// Far more copying directions than buffers: receives that find none wait for one, and
// every stream still arrives intact.
TEST(DataPath, CopyDirectionsWaitForBuffersWhenAllAreOut) {
    EchoServer echo;
    ProxyUnderTest proxy{echo.endpoint(), with_path(DataPath::Copy, /*copy_buffers=*/2)};

    ASSERT_TRUE(all_echoed(proxy, 16, kMiB));
    EngineStats s = proxy.stats();
    EXPECT_GT(s.buffer_waits, 0u) << s.to_line();
    EXPECT_EQ(s.splices, 0u);
    EXPECT_TRUE(settles(proxy));
}

// Under auto, a direction that finds no buffer takes a pipe instead of waiting.
TEST(DataPath, AutoSplicesWhenCopyBuffersRunOut) {
    EchoServer echo;
    ProxyUnderTest proxy{echo.endpoint(), with_path(DataPath::Auto, /*copy_buffers=*/2)};

    // 4 KiB per connection: too small to turn bulk, so any splice is the fallback.
    ASSERT_TRUE(all_echoed(proxy, 32, 4096));
    EngineStats s = proxy.stats();
    if (s.buffer_waits == 0)
        GTEST_SKIP() << "no receive found the buffers all out this time: " << s.to_line();
    EXPECT_GE(s.switches_to_splice, 1u) << s.to_line();
    EXPECT_TRUE(settles(proxy));
}

// Clients that fill the proxy's buffers and then reset: every buffer comes back.
TEST(DataPath, CopyBuffersComeBackWhenConnectionsAreReset) {
    EchoServer echo;
    ProxyUnderTest proxy{echo.endpoint(), with_path(DataPath::Copy)};

    std::vector<UniqueFd> clients;
    // More than every socket buffer on the echo path can hold (loopback buffers grow
    // to several MiB each).
    const std::vector<std::byte> data = Payload{5}.bytes(0, 96 * kMiB);
    for (int i = 0; i < 4; ++i) {
        UniqueFd fd = connect_to(proxy.endpoint());
        // Send without ever reading the echo until everything on the way is full and
        // the proxy holds chunks it cannot send: the send times out.
        IoResult sent = send_all(fd.get(), data, Deadline{500ms});
        ASSERT_EQ(sent.status, IoStatus::Timeout) << "the echo path absorbed " << sent.bytes;
        clients.push_back(std::move(fd));
    }
    EXPECT_TRUE(eventually([&] { return proxy.stats().buffers_out > 0; }, Deadline{5s}))
        << proxy.stats().to_line();
    for (UniqueFd& fd : clients) {
        linger reset{1, 0}; // close with RST
        ::setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
        fd.reset();
    }
    EXPECT_TRUE(settles(proxy));
}

// A buffer count the kernel would refuse is a start error, not a silent fallback.
TEST(DataPath, CopyBufferCountMustBeAPowerOfTwo) {
    EchoServer echo;
    EngineConfig config;
    config.listen = loopback_any_port();
    config.upstream = echo.endpoint();
    config.data_path = DataPath::Copy;
    config.copy.copy_buffers = 100;
    try {
        Engine::start(config);
        ADD_FAILURE() << "started with 100 copy buffers";
    } catch (const StartError& e) {
        EXPECT_NE(std::string(e.what()).find("power of two"), std::string::npos) << e.what();
    }
}

// The low-latency mode polls before it sleeps: the same exchanges, intact, with the
// shard entering the kernel more often than completions arrive (the polls that found
// nothing), and the engine idle again afterwards.
TEST(BusyPoll, ForwardsIntactAndPollsBeforeSleeping) {
    EchoServer echo;
    ProxyUnderTest proxy(echo.endpoint(), [&](EngineConfig& c) {
        c.ring.busy_poll = std::chrono::microseconds{200};
    });
    UniqueFd client = connect_to(proxy.endpoint());

    ping_pong(client.get(), 64, 200, 9);
    bulk_echo(client.get(), 4 * kMiB, 10);
    EngineStats s = proxy.stats();
    EXPECT_GT(s.enters, s.completions) << s.to_line();

    client.reset();
    EXPECT_TRUE(settles(proxy));
}

} // namespace
} // namespace uringfwd::test
