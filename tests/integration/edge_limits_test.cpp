// At the edge (issue 23), through the binary and its configuration file: a route's
// allow/deny lists (the client's own address, or with accept_proxy the PROXY header's),
// the engine's default lists, max_connections_per_source counted once for all shards,
// connection_rate_per_source's burst and rate, the per-source table's bound under a
// flood of distinct sources, and --check's FILE:LINE for bad values. Clients bind
// 127.0.0.x before connecting, so each test picks its sources; counters are read from
// /metrics.
#include "tests/support/binary_process.hpp"
#include "tests/support/echo_server.hpp"
#include "tests/support/eventually.hpp"
#include "tests/support/metrics_scrape.hpp"
#include "tests/support/named_server.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/temp_config_file.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// The binary serving one route "web" from a configuration file: `engine_keys` in
// [engine] (after shards and metrics), `route_keys` in the route.
struct EdgeProxy {
    std::unique_ptr<ConfigFile> file;
    std::unique_ptr<BinaryProcess> process;
    Endpoint endpoint;
    uint16_t metrics = 0;

    std::map<std::string, double> samples() const {
        return parse_samples(scrape_metrics(metrics, Deadline{5s}));
    }
    double closed(const std::string& reason) const {
        return sum_of(samples(), "uringfwd_route_connections_closed_total",
                      fmt::format("reason=\"{}\"", reason));
    }
};

std::string config_text(const Endpoint& upstream, uint16_t port, int shards,
                        const std::string& engine_keys, const std::string& route_keys) {
    return fmt::format("[engine]\nshards = {}\nmetrics = \"127.0.0.1:0\"\n{}"
                       "[[route]]\nname = \"web\"\nlisten = \"127.0.0.1:{}\"\n"
                       "idle_timeout = \"1m\"\n{}"
                       "  [[route.upstream]]\n  address = \"{}\"\n",
                       shards, engine_keys, port, route_keys, upstream.to_string());
}

EdgeProxy start_edge(const Endpoint& upstream, const std::string& route_keys, int shards = 1,
                     const std::string& engine_keys = "") {
    EdgeProxy proxy;
    proxy.file = std::make_unique<ConfigFile>(
        config_text(upstream, free_port(), shards, engine_keys, route_keys));
    proxy.process = std::make_unique<BinaryProcess>(
        uring_fwd_binary(), std::vector<std::string>{"--config", proxy.file->path()});
    const std::optional<Endpoint> at = proxy.process->wait_listening(Deadline{10s});
    if (!at)
        throw std::runtime_error("uring-fwd did not start:\n" + proxy.process->stderr_text());
    proxy.endpoint = *at;
    const std::optional<uint16_t> port = metrics_port(*proxy.process, Deadline{5s});
    if (!port)
        throw std::runtime_error("no metrics port:\n" + proxy.process->stderr_text());
    proxy.metrics = *port;
    return proxy;
}

// A TCP connection to `to` from `source` (an IPv4 loopback address, port chosen by the
// kernel); throws when it cannot be made.
UniqueFd connect_from(const std::string& source, const Endpoint& to) {
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in from{};
    from.sin_family = AF_INET;
    if (::inet_pton(AF_INET, source.c_str(), &from.sin_addr) != 1)
        throw std::runtime_error("not an IPv4 address: " + source);
    sockaddr_in dest{};
    dest.sin_family = AF_INET;
    dest.sin_port = htons(to.port);
    ::inet_pton(AF_INET, to.host.c_str(), &dest.sin_addr);
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0 ||
        ::connect(fd.get(), reinterpret_cast<sockaddr*>(&dest), sizeof(dest)) != 0)
        throw std::system_error(errno, std::generic_category(),
                                "connect " + to.to_string() + " from " + source);
    return fd;
}

// What the first read of a client gets: the upstream's name byte ('u'), or how it
// ended (a refused client is reset before any upstream work).
struct FirstRead {
    IoStatus status = IoStatus::NotDone;
    char name = 0;
};
FirstRead first_read(int fd, const Deadline& deadline) {
    FirstRead out;
    std::span<std::byte> byte{reinterpret_cast<std::byte*>(&out.name), 1};
    out.status = recv_all(fd, byte, deadline).status;
    return out;
}

// Whether a client from `source` is served: it gets the upstream's name, and then
// `bytes` bytes it sends come back intact.
bool served_from(const std::string& source, const Endpoint& to, std::size_t bytes = 0,
                 UniqueFd* keep = nullptr) {
    UniqueFd fd = connect_from(source, to);
    const FirstRead got = first_read(fd.get(), Deadline{5s});
    if (got.status != IoStatus::Ok || got.name != 'u')
        return false;
    if (bytes > 0) {
        std::vector<std::byte> sent(bytes);
        for (std::size_t i = 0; i < bytes; ++i)
            sent[i] = static_cast<std::byte>((i * 131 + 7) & 0xff);
        if (send_all(fd.get(), sent, Deadline{5s}).status != IoStatus::Ok)
            return false;
        std::vector<std::byte> back(bytes);
        if (recv_all(fd.get(), back, Deadline{5s}).status != IoStatus::Ok || back != sent)
            return false;
    }
    if (keep != nullptr)
        *keep = std::move(fd);
    return true;
}

// Whether a client from `source` is reset before it is served (no name byte).
bool reset_from(const std::string& source, const Endpoint& to) {
    UniqueFd fd = connect_from(source, to);
    return first_read(fd.get(), Deadline{5s}).status == IoStatus::Reset;
}

TEST(EdgeLimits, ADenyListResetsItsAddressBeforeTheUpstreamAndServesAnother) {
    NamedServer upstream{'u'};
    const EdgeProxy proxy = start_edge(upstream.endpoint(), "deny = [\"127.0.0.2\"]\n");
    EXPECT_TRUE(reset_from("127.0.0.2", proxy.endpoint)) << proxy.process->stderr_text();
    EXPECT_TRUE(served_from("127.0.0.3", proxy.endpoint, 64 * 1024));
    EXPECT_TRUE(reset_from("127.0.0.2", proxy.endpoint));
    EXPECT_EQ(upstream.accepted(), 1u) << "a denied client never reaches the upstream";
    EXPECT_TRUE(eventually([&] { return proxy.closed("denied") == 2; }, Deadline{5s}))
        << proxy.closed("denied");
    EXPECT_EQ(proxy.closed("source_limit"), 0);
    // The engine-wide counter beside the route's.
    EXPECT_EQ(
        sum_of(proxy.samples(), "uringfwd_shard_connections_closed_total", "reason=\"denied\""), 2);
    EXPECT_NE(proxy.process->stderr_text().find("route \"web\": client 127.0.0.2:"),
              std::string::npos)
        << proxy.process->stderr_text();
}

TEST(EdgeLimits, AnAllowListServesOnlyWhatItNamesAndTheEnginesListsAreTheDefault) {
    NamedServer upstream{'u'};
    // The route's own lists replace the engine's: 127.0.0.4 (the engine's) is refused
    // here, as is 127.0.0.5 (in neither).
    {
        const EdgeProxy own = start_edge(upstream.endpoint(), "allow = [\"127.0.0.3/32\"]\n", 1,
                                         "allow = [\"127.0.0.4\"]\n");
        EXPECT_TRUE(served_from("127.0.0.3", own.endpoint, 1024));
        EXPECT_TRUE(reset_from("127.0.0.4", own.endpoint));
        EXPECT_TRUE(reset_from("127.0.0.5", own.endpoint));
        EXPECT_TRUE(eventually([&] { return own.closed("denied") == 2; }, Deadline{5s}));
    }
    // A route with neither list takes the engine's: deny wins inside the allowed range.
    const EdgeProxy inherited = start_edge(upstream.endpoint(), "", 1,
                                           "allow = [\"127.0.1.0/24\"]\ndeny = [\"127.0.1.9\"]\n");
    EXPECT_TRUE(served_from("127.0.1.4", inherited.endpoint, 1024));
    EXPECT_TRUE(reset_from("127.0.1.9", inherited.endpoint));
    EXPECT_TRUE(reset_from("127.0.0.3", inherited.endpoint));
    EXPECT_TRUE(eventually([&] { return inherited.closed("denied") == 2; }, Deadline{5s}));
}

TEST(EdgeLimits, WithAcceptProxyTheHeadersAddressIsJudgedNotTheSocketsPeer) {
    NamedServer upstream{'u'};
    // The socket's peer (127.0.0.1) is in no list: only the header's address counts.
    const EdgeProxy proxy =
        start_edge(upstream.endpoint(),
                   "accept_proxy = true\nallow = [\"10.0.0.0/8\"]\ndeny = [\"10.9.9.9\"]\n");
    const auto with_header = [&](const std::string& client) {
        UniqueFd fd = connect_to(proxy.endpoint);
        const std::string header =
            fmt::format("PROXY TCP4 {} 127.0.0.1 40000 {}\r\n", client, proxy.endpoint.port);
        EXPECT_EQ(send_text(fd.get(), header + "ping", Deadline{5s}).status, IoStatus::Ok);
        const FirstRead got = first_read(fd.get(), Deadline{5s});
        if (got.status != IoStatus::Ok)
            return got.status;
        std::string echo(4, '\0');
        std::span<std::byte> out{reinterpret_cast<std::byte*>(echo.data()), echo.size()};
        EXPECT_EQ(recv_all(fd.get(), out, Deadline{5s}).status, IoStatus::Ok);
        EXPECT_EQ(echo, "ping");
        return IoStatus::Ok;
    };
    EXPECT_EQ(with_header("10.1.2.3"), IoStatus::Ok) << proxy.process->stderr_text();
    EXPECT_EQ(with_header("10.9.9.9"), IoStatus::Reset);
    EXPECT_EQ(with_header("192.0.2.1"), IoStatus::Reset);
    EXPECT_TRUE(eventually([&] { return proxy.closed("denied") == 2; }, Deadline{5s}));
    EXPECT_NE(proxy.process->stderr_text().find("client 10.9.9.9:40000 is denied"),
              std::string::npos)
        << proxy.process->stderr_text();
}

// Connects from the current thread moved to `cpu` (then back where it may run): on
// loopback the SYN is received on the sender's CPU, and the engine's CPU steering
// (SO_INCOMING_CPU) serves it on that CPU's shard.
template <typename F> auto on_cpu(int cpu, F&& connect) {
    cpu_set_t before;
    CPU_ZERO(&before);
    ::pthread_getaffinity_np(::pthread_self(), sizeof(before), &before);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    ::pthread_setaffinity_np(::pthread_self(), sizeof(one), &one);
    auto result = connect();
    ::pthread_setaffinity_np(::pthread_self(), sizeof(before), &before);
    return result;
}

// The first two CPUs this process may run on: the two shards' (placement takes the
// first N of the affinity mask).
std::vector<int> first_two_cpus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    std::vector<int> out;
    if (::sched_getaffinity(0, sizeof(set), &set) != 0)
        return out;
    for (int c = 0; c < CPU_SETSIZE && out.size() < 2; ++c)
        if (CPU_ISSET(c, &set))
            out.push_back(c);
    return out;
}

TEST(EdgeLimits, MaxConnectionsPerSourceIsOneCountForAllShards) {
    const std::vector<int> cpus = first_two_cpus();
    if (cpus.size() < 2) {
        GTEST_SKIP() << "needs two CPUs";
    }
    NamedServer upstream{'u'};
    const EdgeProxy proxy = start_edge(upstream.endpoint(), "max_connections_per_source = 5\n", 2);
    // Five from 127.0.0.2, spread over both shards.
    std::vector<UniqueFd> held(5);
    for (std::size_t i = 0; i < held.size(); ++i)
        ASSERT_TRUE(on_cpu(cpus[i % 2],
                           [&] { return served_from("127.0.0.2", proxy.endpoint, 16, &held[i]); }))
            << i << "\n"
            << proxy.process->stderr_text();
    const auto samples = proxy.samples();
    const double shard0 = sum_of(samples, "uringfwd_shard_accepted_total", "shard=\"0\"");
    const double shard1 = sum_of(samples, "uringfwd_shard_accepted_total", "shard=\"1\"");
    EXPECT_EQ(shard0 + shard1, 5);
    EXPECT_GE(shard0, 1) << "both shards serve the source";
    EXPECT_GE(shard1, 1) << "both shards serve the source";
    // The sixth is reset on either shard: the count is the engine's, not a shard's.
    for (int cpu : cpus)
        EXPECT_TRUE(on_cpu(cpu, [&] { return reset_from("127.0.0.2", proxy.endpoint); }))
            << "cpu " << cpu;
    // Another source is not affected.
    UniqueFd other;
    EXPECT_TRUE(served_from("127.0.0.3", proxy.endpoint, 1024, &other));
    EXPECT_EQ(upstream.open_connections(), 6u);
    EXPECT_TRUE(eventually([&] { return proxy.closed("source_limit") == 2; }, Deadline{5s}));

    // One closes: its hold is given back once the proxy has closed it, and one more
    // from the source is let in (a few tries while the close goes through).
    held[0].reset();
    int tries = 0;
    UniqueFd sixth;
    const bool admitted = eventually(
        [&] {
            ++tries;
            return served_from("127.0.0.2", proxy.endpoint, 16, &sixth);
        },
        Deadline{5s}, 50ms);
    EXPECT_TRUE(admitted) << proxy.process->stderr_text();
    EXPECT_LE(tries, 50);
    // Full again.
    EXPECT_TRUE(reset_from("127.0.0.2", proxy.endpoint));
    EXPECT_EQ(upstream.open_connections(), 6u);
}

TEST(EdgeLimits, ConnectionRatePerSourceAdmitsTheBurstThenTheRate) {
    NamedServer upstream{'u'};
    const EdgeProxy proxy =
        start_edge(upstream.endpoint(),
                   "connection_rate_per_source = \"10/s\"\nconnection_burst_per_source = 5\n");
    const auto attempt = [&] {
        UniqueFd fd = connect_from("127.0.0.2", proxy.endpoint);
        const FirstRead got = first_read(fd.get(), Deadline{5s});
        EXPECT_TRUE(got.status == IoStatus::Ok || got.status == IoStatus::Reset)
            << to_string(got.status);
        return got.status == IoStatus::Ok;
    };
    // Back to back: the burst, then nothing until the bucket refills (one per 100 ms).
    const Clock::time_point start = Clock::now();
    int burst = 0;
    for (int i = 0; i < 8; ++i)
        burst += attempt() ? 1 : 0;
    const double burst_took = std::chrono::duration<double>(Clock::now() - start).count();
    EXPECT_GE(burst, 5);
    EXPECT_LE(burst, 5 + static_cast<int>(burst_took * 10) + 1) << burst_took << " s";
    // Then for 3 s, a try every 20 ms: about 10 per second get in.
    const Clock::time_point steady = Clock::now();
    int admitted = 0;
    int tries = 0;
    while (Clock::now() - steady < 3s && tries < 400) {
        ++tries;
        admitted += attempt() ? 1 : 0;
        std::this_thread::sleep_for(20ms);
    }
    const double took = std::chrono::duration<double>(Clock::now() - steady).count();
    EXPECT_GE(admitted, static_cast<int>(took * 10) - 3) << tries << " tries in " << took << " s";
    EXPECT_LE(admitted, static_cast<int>(took * 10) + 2) << tries << " tries in " << took << " s";
    const int refused = (8 - burst) + (tries - admitted);
    EXPECT_TRUE(eventually([&] { return proxy.closed("source_limit") == refused; }, Deadline{5s}))
        << proxy.closed("source_limit") << " vs " << refused;
    // Another source has a bucket of its own.
    EXPECT_TRUE(served_from("127.0.0.3", proxy.endpoint, 16));
}

// 127.1.0.0 + i: a distinct source per i (up to 16 million).
std::string source_number(uint32_t i) {
    const uint32_t address = (127u << 24 | 1u << 16) + i;
    return fmt::format("{}.{}.{}.{}", address >> 24, (address >> 16) & 255, (address >> 8) & 255,
                       address & 255);
}

TEST(EdgeLimits, AFloodOfDistinctSourcesKeepsTheTableWithinItsBound) {
    EchoServer upstream; // one thread for 20 000 connections
    // 256 entries; a rate keeps each source's entry live for 1 s after its connection,
    // so a few thousand new sources a second must evict.
    constexpr std::size_t kCapacity = 256;
    const EdgeProxy proxy =
        start_edge(upstream.endpoint(), "connection_rate_per_source = \"1/s\"\n", 1,
                   fmt::format("source_table_size = {}\n", kCapacity));
    const Clock::time_point start = Clock::now();
    uint32_t sources = 0;
    double most_tracked = 0;
    for (; sources < 20000 && Clock::now() - start < 15s; ++sources) {
        UniqueFd fd = connect_from(source_number(sources), proxy.endpoint);
        ASSERT_EQ(send_text(fd.get(), "x", Deadline{5s}).status, IoStatus::Ok);
        const FirstRead got = first_read(fd.get(), Deadline{5s}); // the echo
        ASSERT_EQ(got.status, IoStatus::Ok) << "source " << source_number(sources);
        ASSERT_EQ(got.name, 'x');
        abortive_close(fd); // no TIME_WAIT left behind for 20 000 ports
        if (sources % 2000 == 1999) {
            const auto samples = proxy.samples();
            most_tracked = std::max(most_tracked, sum_of(samples, "uringfwd_source_table_tracked"));
        }
    }
    ASSERT_GE(sources, 8 * kCapacity) << "too slow to flood the table";
    const auto samples = proxy.samples();
    most_tracked = std::max(most_tracked, sum_of(samples, "uringfwd_source_table_tracked"));
    EXPECT_EQ(sum_of(samples, "uringfwd_source_table_capacity"), kCapacity);
    EXPECT_LE(most_tracked, kCapacity);
    EXPECT_GT(most_tracked, 0);
    // Every source was new, so none was over its rate; the table made room by
    // forgetting idle sources (each forgotten one is one the rate no longer remembers).
    const double evictions = sum_of(samples, "uringfwd_source_table_evictions_total");
    EXPECT_GT(evictions, 0);
    EXPECT_LE(evictions, sources);
    EXPECT_EQ(sum_of(samples, "uringfwd_source_table_untracked_total"), 0);
    EXPECT_EQ(proxy.closed("source_limit"), 0);
    EXPECT_EQ(upstream.accepted(), sources);
}

TEST(EdgeLimits, AllowAndDenyFlagsJudgeTheCommandLinesRoute) {
    NamedServer upstream{'u'};
    RunningBinary fwd =
        start_binary("127.0.0.1:0", upstream.endpoint(),
                     {"--shards", "1", "--allow", "127.0.0.0/24,::1/128", "--deny", "127.0.0.2"});
    EXPECT_TRUE(served_from("127.0.0.3", fwd.endpoint, 1024)) << fwd.process->stderr_text();
    EXPECT_TRUE(reset_from("127.0.0.2", fwd.endpoint)); // denied inside the allowed range
    EXPECT_TRUE(reset_from("127.0.1.1", fwd.endpoint)); // outside it
    EXPECT_EQ(upstream.accepted(), 1u);

    // A range that is none is refused before anything is bound, naming the flag.
    BinaryProcess bad{uring_fwd_binary(),
                      {"--listen", "127.0.0.1:0", "--upstream", upstream.endpoint().to_string(),
                       "--deny", "127.0.0.0/8,10.0.0.1/8"}};
    const auto status = bad.wait_exit(Deadline{5s});
    ASSERT_TRUE(status.has_value());
    EXPECT_TRUE(status->exited && status->code != 0) << status->describe();
    EXPECT_NE(bad.stderr_text().find("--deny: 10.0.0.1/8: bits are set past the prefix length"),
              std::string::npos)
        << bad.stderr_text();
}

TEST(EdgeLimits, CheckNamesTheLineOfABadCidrAndOfABadRate) {
    const ConfigFile file{"[[route]]\n"
                          "name = \"web\"\n"
                          "listen = \"127.0.0.1:1\"\n"
                          "deny = [\"127.0.0.2\",\n"
                          "        \"10.0.0.1/8\"]\n"
                          "connection_rate_per_source = \"10 per second\"\n"
                          "  [[route.upstream]]\n"
                          "  address = \"127.0.0.1:2\"\n"};
    BinaryProcess check{uring_fwd_binary(), {"--config", file.path(), "--check"}};
    const auto status = check.wait_exit(Deadline{5s});
    ASSERT_TRUE(status.has_value());
    EXPECT_TRUE(status->exited && status->code != 0) << status->describe();
    const std::string err = check.stderr_text();
    EXPECT_NE(err.find(file.path() + ":5: route \"web\": deny: \"10.0.0.1/8\": bits are set past "
                                     "the prefix length"),
              std::string::npos)
        << err;
    EXPECT_NE(err.find(file.path() + ":6: route \"web\": connection_rate_per_source must be a "
                                     "rate such as \"10/s\""),
              std::string::npos)
        << err;
}

} // namespace
} // namespace uringfwd::test
