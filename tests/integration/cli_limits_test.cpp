// The binary's limits and timeouts, through its flags (issue 21 listed them untested):
// --max-connections holds exactly that many open on two shards whichever shard each
// client lands on, the others wait (and /metrics counts them) and go in as
// connections close; --idle-timeout closes an idle connection with FIN and leaves one
// that keeps moving bytes.
#include "tests/support/binary_process.hpp"
#include "tests/support/metrics_scrape.hpp"
#include "tests/support/named_server.hpp"
#include "tests/support/proc_stats.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"

#include <gtest/gtest.h>

#include <sched.h>
#include <sys/socket.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

bool two_cpus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    return ::sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) >= 2;
}

// How many of `fds` have been sent the upstream's name byte (read without waiting).
std::size_t served(std::vector<UniqueFd>& fds, std::vector<bool>& got) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < fds.size(); ++i) {
        if (!got[i] && fds[i]) {
            char name = 0;
            got[i] = ::recv(fds[i].get(), &name, 1, MSG_DONTWAIT) == 1;
        }
        n += got[i] ? 1 : 0;
    }
    return n;
}

TEST(CliLimits, MaxConnectionsIsOneNumberForAllShardsAndTheRestWaitCounted) {
    if (!two_cpus()) {
        GTEST_SKIP() << "needs two CPUs";
    }
    NamedServer upstream{'u'};
    RunningBinary fwd =
        start_binary("127.0.0.1:0", upstream.endpoint(),
                     {"--shards", "2", "--max-connections", "3", "--metrics", "127.0.0.1:0"});
    const auto port = metrics_port(*fwd.process, Deadline{5s});
    ASSERT_TRUE(port.has_value()) << fwd.process->stderr_text();
    constexpr std::size_t kClients = 8;
    std::vector<UniqueFd> fds;
    for (std::size_t i = 0; i < kClients; ++i)
        fds.push_back(connect_to(fwd.endpoint));
    std::vector<bool> got(kClients, false);
    eventually([&] { return served(fds, got) >= 3; }, Deadline{5s});
    std::this_thread::sleep_for(300ms);
    EXPECT_EQ(served(fds, got), 3u) << fwd.process->stderr_text();
    EXPECT_EQ(upstream.open_connections(), 3u);

    // The gauges by value: 3 open, the other 5 waiting (in the listen backlog).
    std::map<std::string, double> samples;
    const bool counted = eventually(
        [&] {
            samples = parse_samples(scrape_metrics(*port, Deadline{5s}));
            return sum_of(samples, "uringfwd_route_connections_waiting") == kClients - 3;
        },
        Deadline{5s});
    EXPECT_TRUE(counted) << "waiting: " << sum_of(samples, "uringfwd_route_connections_waiting");
    EXPECT_EQ(sum_of(samples, "uringfwd_route_connections_active", "route=\"default\""), 3);
    EXPECT_EQ(sum_of(samples, "uringfwd_route_connections_waiting", "route=\"default\""),
              kClients - 3);

    // Each close lets exactly one more in.
    for (std::size_t want = 4; want <= kClients; ++want) {
        for (std::size_t i = 0; i < kClients; ++i)
            if (got[i] && fds[i]) {
                fds[i].reset();
                break;
            }
        eventually([&] { return served(fds, got) >= want; }, Deadline{5s});
        std::this_thread::sleep_for(100ms);
        EXPECT_EQ(served(fds, got), want);
        EXPECT_LE(upstream.open_connections(), 3u);
    }
    fds.clear();
}

TEST(CliLimits, IdleTimeoutClosesTheIdleConnectionWithFinAndKeepsTheBusyOne) {
    NamedServer upstream{'u'};
    RunningBinary fwd =
        start_binary("127.0.0.1:0", upstream.endpoint(),
                     {"--shards", "1", "--idle-timeout", "300ms", "--metrics", "127.0.0.1:0"});
    const auto port = metrics_port(*fwd.process, Deadline{5s});
    ASSERT_TRUE(port.has_value()) << fwd.process->stderr_text();
    UniqueFd idle;
    UniqueFd busy;
    ASSERT_EQ(name_through(fwd.endpoint, Deadline{5s}, {}, &idle), 'u');
    ASSERT_EQ(name_through(fwd.endpoint, Deadline{5s}, {}, &busy), 'u');
    const auto start = Clock::now();
    // The busy one moves a byte every 100 ms for 1.2 s, each echoed back.
    for (int i = 0; i < 12; ++i) {
        ASSERT_EQ(send_text(busy.get(), "x", Deadline{1s}).status, IoStatus::Ok) << i;
        char echo = 0;
        std::span<std::byte> out{reinterpret_cast<std::byte*>(&echo), 1};
        ASSERT_EQ(recv_all(busy.get(), out, Deadline{1s}).status, IoStatus::Ok) << i;
        std::this_thread::sleep_for(100ms);
    }
    const IoResult end = recv_until_eof(idle.get(), Deadline{2s});
    EXPECT_EQ(end.status, IoStatus::Eof) << to_string(end.status); // FIN, not RST
    EXPECT_LT(Clock::now() - start, 2s);
    std::map<std::string, double> samples;
    EXPECT_TRUE(eventually(
        [&] {
            samples = parse_samples(scrape_metrics(*port, Deadline{5s}));
            return sum_of(samples, "uringfwd_route_connections_closed_total",
                          "reason=\"idle_timeout\"") == 1;
        },
        Deadline{5s}));
    EXPECT_EQ(sum_of(samples, "uringfwd_route_connections_active"), 1); // the busy one
}

} // namespace
} // namespace uringfwd::test
