// Two shards pinned to CPUs 0 and 1: CPU steering sends each connection to the shard of
// the CPU its client ran on, the kernel's hash spreads them when steering is off, a
// drain lets a transfer in flight finish while new clients are turned away, and the
// per-shard counters add up to the engine's totals.
#include "tests/support/data_path_under_test.hpp"
#include "tests/support/echo_load.hpp"
#include "tests/support/echo_server.hpp"
#include "tests/support/exchange.hpp"
#include "tests/support/proc_stats.hpp"
#include "tests/support/proxy_under_test.hpp"
#include "tests/support/scripted_peer.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/transfer_checks.hpp"
#include "tests/support/watchdog.hpp"
#include "uringfwd/engine.hpp"

#include <pthread.h>
#include <sched.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kMiB = 1024 * 1024;
const std::vector<int> kShardCpus{0, 1};

// Both CPUs the shards are pinned to must be ours, or pinning (and the test) fails.
bool shard_cpus_available() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(0, sizeof(set), &set) != 0 || CPU_COUNT(&set) < 2)
        return false;
    for (int cpu : kShardCpus)
        if (!CPU_ISSET(cpu, &set))
            return false;
    return true;
}

constexpr const char* kNoShardCpus = "needs CPUs 0 and 1 in the process's affinity mask";

// ProxyUnderTest runs the default shard layout; these tests need to choose CPUs,
// shard count and steering, so they own an Engine configured here. Stopped without
// drain and joined under a watchdog on destruction, like ProxyUnderTest.
class ShardedProxy {
public:
    struct Options {
        bool steer_by_cpu = true;
        std::chrono::milliseconds drain_timeout{30000};
    };

    ShardedProxy(const Endpoint& upstream, Options options) {
        EngineConfig config;
        config.listen = loopback_any_port();
        config.upstream = upstream;
        config.placement.cpus = kShardCpus;
        config.placement.shards = kShardCpus.size();
        config.placement.steer_by_cpu = options.steer_by_cpu;
        config.drain_timeout = options.drain_timeout;
        config.connect_timeout = 2000ms;
        config.log_level = LogLevel::Info;
        if (auto direct = direct_descriptors_under_test())
            config.ring.direct_descriptors = *direct;
        if (auto mechanism = splice_mechanism_under_test())
            config.splice.splice_mechanism = *mechanism;
        config.log_sink = [logs = logs_](LogLevel level, std::string_view line) {
            std::lock_guard lock(logs->mu);
            logs->lines.push_back(fmt::format("[{}] {}", to_string(level), line));
        };
        engine_ = Engine::start(std::move(config));
    }

    ~ShardedProxy() {
        {
            Watchdog dog{10000ms, "sharded Engine stop/wait"};
            engine_->stop(0ms);
            engine_->wait();
            engine_.reset();
        }
        if (::testing::Test::HasFailure()) {
            std::lock_guard lock(logs_->mu);
            for (const std::string& line : logs_->lines)
                fmt::print(stderr, "engine log: {}\n", line);
        }
    }
    ShardedProxy(const ShardedProxy&) = delete;
    ShardedProxy& operator=(const ShardedProxy&) = delete;

    Engine& engine() { return *engine_; }
    Endpoint endpoint() const { return engine_->listen_endpoint(); }

    // Accepted connections per shard CPU.
    std::map<int, uint64_t> accepted_by_cpu() const {
        std::map<int, uint64_t> out;
        for (const ShardStats& s : engine_->shard_stats())
            out[s.cpu] = s.counters.accepted;
        return out;
    }

    // Total accepted so far; a shard bumps it on its own thread, so the tests wait for it
    // to reach what the clients saw rather than read it once.
    bool wait_accepted(uint64_t total, const Deadline& deadline) const {
        return eventually([&] { return engine_->stats().accepted >= total; }, deadline);
    }

private:
    struct LogBuffer {
        std::mutex mu;
        std::vector<std::string> lines;
    };
    std::shared_ptr<LogBuffer> logs_ = std::make_shared<LogBuffer>();
    std::unique_ptr<Engine> engine_;
};

std::string join_failures(const std::vector<std::string>& failures) {
    std::string out;
    for (const auto& f : failures)
        out += "\n  " + f;
    return out;
}

// Runs `connections` echo exchanges from a thread pinned to `cpu`. Threads the load
// helper starts inherit the pin, so every connect (and so every SYN, which loopback
// processes on the sending CPU) happens there.
EchoLoadResult echo_load_from_cpu(int cpu, const Endpoint& proxy, std::size_t connections,
                                  std::size_t bytes_each) {
    std::promise<EchoLoadResult> done;
    std::future<EchoLoadResult> result = done.get_future();
    std::thread client([&] {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (int err = ::pthread_setaffinity_np(::pthread_self(), sizeof(set), &set); err != 0) {
            EchoLoadResult failed;
            failed.failures.push_back(fmt::format("pin to CPU {}: {}", cpu, std::strerror(err)));
            done.set_value(failed);
            return;
        }
        done.set_value(run_echo_load(proxy, connections, bytes_each, 1, Deadline{30s}));
    });
    client.join();
    return result.get();
}

class SteeredShards : public ::testing::TestWithParam<int> {};

// Every connection made from CPU k lands on the shard pinned to CPU k.
TEST_P(SteeredShards, ConnectionsFromOneCpuGoToItsShard) {
    if (!shard_cpus_available()) {
        GTEST_SKIP() << kNoShardCpus;
    }
    constexpr std::size_t kConnections = 20;
    const int cpu = GetParam();
    EchoServer echo;
    ShardedProxy proxy{echo.endpoint(), {.steer_by_cpu = true}};
    // Without the BPF program the kernel hash decides and this test means nothing.
    ASSERT_NE(proxy.engine().describe().find("incoming cpu + bpf"), std::string::npos)
        << proxy.engine().describe();

    const EchoLoadResult load = echo_load_from_cpu(cpu, proxy.endpoint(), kConnections, 512);
    EXPECT_EQ(load.verified, kConnections) << join_failures(load.failures);
    ASSERT_TRUE(proxy.wait_accepted(kConnections, Deadline{5s}));

    const std::map<int, uint64_t> accepted = proxy.accepted_by_cpu();
    for (int shard_cpu : kShardCpus) {
        const uint64_t expected = shard_cpu == cpu ? kConnections : 0;
        EXPECT_EQ(accepted.at(shard_cpu), expected)
            << "shard on CPU " << shard_cpu << " (clients on CPU " << cpu << ")";
    }
}

INSTANTIATE_TEST_SUITE_P(Cpu, SteeredShards, ::testing::ValuesIn(kShardCpus),
                         [](const ::testing::TestParamInfo<int>& info) {
                             return "client_on_cpu_" + std::to_string(info.param);
                         });

// With steering off, the reuseport hash of each connection's ports picks the shard:
// connections from a single CPU still reach both. The chance that 200 hashes all pick
// the same one of two listeners is 2^-199.
TEST(Shards, WithoutSteeringBothShardsServeConnectionsFromOneCpu) {
    if (!shard_cpus_available()) {
        GTEST_SKIP() << kNoShardCpus;
    }
    constexpr std::size_t kConnections = 200;
    EchoServer echo;
    ShardedProxy proxy{echo.endpoint(), {.steer_by_cpu = false}};

    const EchoLoadResult load = echo_load_from_cpu(0, proxy.endpoint(), kConnections, 1024);
    EXPECT_EQ(load.connected, kConnections) << join_failures(load.failures);
    EXPECT_EQ(load.verified, kConnections) << join_failures(load.failures);
    ASSERT_TRUE(proxy.wait_accepted(kConnections, Deadline{5s}));

    const std::map<int, uint64_t> accepted = proxy.accepted_by_cpu();
    uint64_t total = 0;
    for (int shard_cpu : kShardCpus) {
        EXPECT_GT(accepted.at(shard_cpu), 0u) << "shard on CPU " << shard_cpu << " got none";
        total += accepted.at(shard_cpu);
    }
    EXPECT_EQ(total, kConnections);
}

// After stop() with the default drain: the connection in flight carries on to the last
// byte, the listeners close so new clients are refused, and the engine ends by itself
// once the transfer is done.
TEST(Shards, DrainFinishesTransferInFlightAndRefusesNewClients) {
    if (!shard_cpus_available()) {
        GTEST_SKIP() << kNoShardCpus;
    }
    constexpr uint64_t kSize = 64 * kMiB;
    constexpr uint64_t kSeed = 41;
    // A reader at 32 MiB/s keeps the 64 MiB in flight for about two seconds, long enough
    // to stop the engine part-way through.
    ScriptedPeer sink{sink_plan(32 * kMiB)};
    ShardedProxy proxy{sink.endpoint(), {.drain_timeout = 30000ms}};

    UniqueFd client = connect_to(proxy.endpoint());
    std::future<ExchangeResult> sender = std::async(std::launch::async, [&] {
        ExchangePlan plan;
        plan.send_bytes = kSize;
        plan.send_seed = kSeed;
        return exchange(client, plan, Deadline{60s});
    });

    ASSERT_TRUE(eventually([&] { return proxy.engine().stats().bytes_to_upstream >= 4 * kMiB; },
                           Deadline{20s}))
        << "the transfer never got going: " << proxy.engine().stats().to_line();
    const EngineStats at_stop = proxy.engine().stats();
    proxy.engine().stop(); // default drain (30 s)
    EXPECT_EQ(at_stop.active, 1u);
    EXPECT_LT(at_stop.bytes_to_upstream, kSize) << "the transfer was over before stop()";

    // The listeners close when their accepts come back cancelled: a connect may still
    // land in a backlog for a moment, but within a second every connect is refused.
    int last_error = 0;
    const bool refused = eventually(
        [&] {
            UniqueFd late;
            last_error = try_connect(proxy.endpoint(), 200ms, late);
            return last_error == ECONNREFUSED;
        },
        Deadline{1s});
    EXPECT_TRUE(refused) << "last connect after stop(): "
                         << (last_error == 0 ? "connected" : std::strerror(last_error));

    const ExchangeResult mine = sender.get();
    EXPECT_TRUE(SentAll(mine, kSize)) << mine.describe();
    // The sink FINs only after our FIN reached it: EOF here means it got everything.
    EXPECT_TRUE(ReceivedPayload(mine, 0, 0)) << mine.describe();
    const auto theirs = sink.wait_result(Deadline{10s});
    ASSERT_TRUE(theirs.has_value()) << "the sink never finished";
    EXPECT_TRUE(ReceivedPayload(*theirs, kSeed, kSize));
    // Clients that slipped into a backlog before it closed were never forwarded.
    EXPECT_EQ(sink.accepted(), 1u);

    EXPECT_TRUE(eventually([&] { return proxy.engine().stopped(); }, Deadline{5s}))
        << "the engine did not stop after its last connection ended: "
        << proxy.engine().stats().to_line();
}

// Every counter, field by field (to_line() rounds the completions per enter).
std::vector<std::string> differing_fields(const EngineStats& a, const EngineStats& b) {
    std::vector<uint64_t> theirs;
    b.for_each([&](const CounterInfo&, uint64_t value) { theirs.push_back(value); });
    std::vector<std::string> out;
    std::size_t i = 0;
    a.for_each([&](const CounterInfo& info, uint64_t mine) {
        if (mine != theirs[i])
            out.push_back(fmt::format("{}: {} vs {}", info.name, mine, theirs[i]));
        ++i;
    });
    return out;
}

EngineStats sum(const std::vector<ShardStats>& shards) {
    EngineStats total;
    for (const ShardStats& s : shards)
        total += s.counters;
    return total;
}

TEST(Shards, PerShardCountersAddUpToTotals) {
    if (!shard_cpus_available()) {
        GTEST_SKIP() << kNoShardCpus;
    }
    constexpr std::size_t kConnections = 100;
    constexpr std::size_t kBytesEach = 16 * 1024;
    EchoServer echo;
    // Steering off, so both shards have something to count.
    ShardedProxy proxy{echo.endpoint(), {.steer_by_cpu = false}};

    const EchoLoadResult load =
        run_echo_load(proxy.endpoint(), kConnections, kBytesEach, 2, Deadline{30s});
    ASSERT_EQ(load.verified, kConnections) << join_failures(load.failures);
    // Idle: every connection closed in both shards.
    ASSERT_TRUE(eventually([&] { return proxy.engine().stats().active == 0; }, Deadline{5s}))
        << proxy.engine().stats().to_line();

    // Counters of an idle engine can still move (io-wq workers time out and leave), so
    // compare a total against per-shard snapshots taken either side of it that agree.
    std::vector<ShardStats> before;
    EngineStats total;
    std::vector<ShardStats> after;
    const bool steady = eventually(
        [&] {
            before = proxy.engine().shard_stats();
            total = proxy.engine().stats();
            after = proxy.engine().shard_stats();
            return differing_fields(sum(before), sum(after)).empty();
        },
        Deadline{5s});
    ASSERT_TRUE(steady) << "per-shard counters kept changing while idle";
    ASSERT_EQ(before.size(), kShardCpus.size());

    const std::vector<std::string> diff = differing_fields(sum(before), total);
    EXPECT_TRUE(diff.empty()) << "sum of shards vs stats():" << join_failures(diff);
    EXPECT_EQ(total.accepted, kConnections);
    EXPECT_EQ(total.bytes_to_upstream, kConnections * kBytesEach);
    EXPECT_EQ(total.bytes_to_client, kConnections * kBytesEach);
    for (const ShardStats& s : before)
        EXPECT_GT(s.counters.accepted, 0u) << "shard " << s.shard << " on CPU " << s.cpu;
}

} // namespace
} // namespace uringfwd::test
