// Interop: Prometheus' own checker, `promtool check metrics` (Debian package
// prometheus), on live scrapes of the binary's /metrics taken while traffic flows. It
// parses the text exposition format and lints the names (counters end in _total, base
// units, help text present, ...); any complaint fails the test.
#include "tests/support/binary_process.hpp"
#include "tests/support/echo_server.hpp"
#include "tests/support/eventually.hpp"
#include "tests/support/exchange.hpp"
#include "tests/support/metrics_scrape.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/transfer_checks.hpp"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

std::string find_promtool() {
    if (const char* given = std::getenv("PROMTOOL"))
        return given;
    for (const char* dir : {"/usr/bin", "/usr/local/bin", "/bin"}) {
        const std::string path = std::string(dir) + "/promtool";
        if (::access(path.c_str(), X_OK) == 0)
            return path;
    }
    return {};
}

struct CommandResult {
    int status = -1;
    std::string output;
};

// Runs `command` through the shell, stdout and stderr together.
CommandResult run(const std::string& command) {
    CommandResult r;
    FILE* p = ::popen((command + " 2>&1").c_str(), "r");
    if (p == nullptr)
        return r;
    char buf[4096];
    std::size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0)
        r.output.append(buf, n);
    const int status = ::pclose(p);
    r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

TEST(Promtool, CheckMetricsPassesOnLiveScrapesDuringTraffic) {
    const std::string promtool = find_promtool();
    if (promtool.empty())
        GTEST_SKIP() << "promtool not installed (Debian package prometheus)";

    EchoServer echo;
    ReservedPort refusing = reserve_refusing_port(); // some failures to count, too
    RunningBinary fwd = start_binary("127.0.0.1:0", echo.endpoint(),
                                     {"--upstream", refusing.endpoint.to_string(), "--shards", "2",
                                      "--metrics", "127.0.0.1:0", "--access-log", "/dev/null"});
    const auto port = metrics_port(*fwd.process, Deadline{5s});
    ASSERT_TRUE(port.has_value()) << fwd.process->stderr_text();

    // Traffic for the whole test: transfers of 256 KiB, bounded in count and time.
    std::atomic<bool> done{false};
    std::atomic<int> transfers{0};
    std::atomic<int> broken{0};
    const Deadline traffic_deadline{30s};
    std::thread traffic([&] {
        for (int i = 0; i < 200 && !done.load() && !traffic_deadline.expired(); ++i) {
            UniqueFd c = connect_to(fwd.endpoint);
            const ExchangeResult r = exchange(c, source_plan(256 * 1024, 9 + i), Deadline{10s});
            if (ReceivedPayload(r, 9 + i, 256 * 1024))
                ++transfers;
            else
                ++broken;
        }
    });

    const std::string file =
        ::testing::TempDir() + "uring-fwd-scrape-" + std::to_string(::getpid()) + ".prom";
    for (int scrape = 0; scrape < 3; ++scrape) {
        eventually([&] { return transfers.load() >= 3 * (scrape + 1); }, traffic_deadline, 5ms);
        const std::string body = scrape_metrics(*port, Deadline{5s});
        std::ofstream(file, std::ios::trunc) << body;
        const CommandResult r = run(promtool + " check metrics < " + file);
        EXPECT_EQ(r.status, 0) << "promtool check metrics:\n" << r.output;
        EXPECT_EQ(r.output, "") << "promtool check metrics:\n" << r.output;
        const auto samples = parse_samples(body);
        EXPECT_GT(sum_of(samples, "uringfwd_shard_accepted_total"), 0);
        EXPECT_GT(sum_of(samples, "uringfwd_upstream_connect_seconds_count"), 0);
    }
    done.store(true);
    traffic.join();
    ::unlink(file.c_str());
    EXPECT_EQ(broken.load(), 0);
}

} // namespace
} // namespace uringfwd::test
