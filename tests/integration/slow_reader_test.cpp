// A client that reads slower than the upstream writes: the proxy must push back on the
// upstream (stop reading it) instead of buffering, so its memory stays flat while a
// quarter gigabyte passes through. Runs the real binary to measure its RSS alone.
#include "tests/support/binary_process.hpp"
#include "tests/support/exchange.hpp"
#include "tests/support/proc_stats.hpp"
#include "tests/support/scripted_peer.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/transfer_checks.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kMiB = 1024 * 1024;

// Samples a process's RSS on its own thread until destroyed; keeps the peak.
class RssSampler {
public:
    explicit RssSampler(pid_t pid)
        : pid_(pid), thread_([this] {
              while (!stop_.load()) {
                  peak_.store(std::max(peak_.load(), resident_bytes(pid_)));
                  std::this_thread::sleep_for(20ms);
              }
          }) {}
    ~RssSampler() {
        stop_.store(true);
        thread_.join();
    }
    uint64_t peak() const { return peak_.load(); }

private:
    pid_t pid_;
    std::atomic<bool> stop_{false};
    std::atomic<uint64_t> peak_{0};
    std::thread thread_;
};

TEST(SlowReader, BinaryMemoryStaysFlatWhileUpstreamPushes256MiB) {
    constexpr uint64_t kSize = 256 * kMiB;
    ScriptedPeer source{source_plan(kSize, 91)};
    RunningBinary fwd = start_binary("127.0.0.1:0", source.endpoint(), {"--log-level", "warn"});
    const pid_t pid = fwd.process->pid();
    const uint64_t baseline = resident_bytes(pid);
    ASSERT_GT(baseline, 0u);

    ExchangeResult mine;
    uint64_t peak = 0;
    {
        RssSampler sampler{pid};
        UniqueFd client = connect_to(fwd.endpoint);
        ExchangePlan slow = sink_plan();
        slow.read_delay = 2s;        // the proxy has to hold off the upstream meanwhile
        slow.read_chunk = 16 * 1024; // then many small reads
        mine = exchange(client, slow, Deadline{120s});
        peak = sampler.peak();
    }

    EXPECT_TRUE(ReceivedPayload(mine, 91, kSize));
    EXPECT_LT(peak - std::min(peak, baseline), 64 * kMiB)
        << "baseline RSS " << baseline / 1024 << " KiB, peak " << peak / 1024 << " KiB";
    const auto theirs = source.wait_result(Deadline{10s});
    ASSERT_TRUE(theirs.has_value());
    EXPECT_TRUE(SentAll(*theirs, kSize));
    // Pipe pages are kernel memory and do not show in RSS. That the upstream could not
    // finish sending while the client was not reading shows the data was not parked in
    // the proxy's pipes either.
    EXPECT_GT(theirs->send_finished, 1500ms)
        << "the upstream sent all 256 MiB before the client read anything";
    RecordProperty("rss_baseline_kib", static_cast<int>(baseline / 1024));
    RecordProperty("rss_peak_kib", static_cast<int>(peak / 1024));
}

} // namespace
} // namespace uringfwd::test
