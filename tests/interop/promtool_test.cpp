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
#include "tests/support/temp_config_file.hpp"
#include "tests/support/transfer_checks.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
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

// The families that appear only with their feature, by value and through promtool: the
// active health check's (one member up, one refusing and so down) and the route's
// waiting gauge (one client open at max_connections = 1, one waiting).
TEST(Promtool, HealthCheckAndWaitingFamiliesHaveTheirValues) {
    const std::string promtool = find_promtool();
    if (promtool.empty())
        GTEST_SKIP() << "promtool not installed (Debian package prometheus)";

    EchoServer echo;
    ReservedPort refusing = reserve_refusing_port();
    const std::string up = echo.endpoint().to_string();
    const std::string down = refusing.endpoint.to_string();
    const ConfigFile file{fmt::format(
        "[engine]\nshards = 1\n[[route]]\nname = \"web\"\nlisten = \"127.0.0.1:0\"\n"
        "max_connections = 1\n  [route.health_check]\n  interval = \"50ms\"\n"
        "  timeout = \"200ms\"\n  rise = 1\n  fall = 1\n"
        "  [[route.upstream]]\n  address = \"{}\"\n  [[route.upstream]]\n  address = \"{}\"\n",
        up, down)};
    BinaryProcess fwd{uring_fwd_binary(), {"--config", file.path(), "--metrics", "127.0.0.1:0"}};
    const std::optional<Endpoint> at = fwd.wait_listening(Deadline{10s});
    ASSERT_TRUE(at) << fwd.stderr_text();
    const auto port = metrics_port(fwd, Deadline{5s});
    ASSERT_TRUE(port.has_value()) << fwd.stderr_text();

    // The refusing member marked down by the checker, so the open client is on the echo.
    const std::string down_member = fmt::format("upstream=\"{}\"", down);
    const std::string up_member = fmt::format("upstream=\"{}\"", up);
    std::map<std::string, double> samples;
    const auto scrape = [&] { samples = parse_samples(scrape_metrics(*port, Deadline{5s})); };
    EXPECT_TRUE(eventually(
        [&] {
            scrape();
            return sum_of(samples, "uringfwd_upstream_health_check_failures_total", down_member) >=
                       1 &&
                   sum_of(samples, "uringfwd_upstream_health_checks_total", up_member) >= 2;
        },
        Deadline{10s}))
        << fwd.stderr_text();
    // Open and left so (an exchange would end it with its FIN), then one more client,
    // which waits in the backlog: the route is at its limit.
    UniqueFd open = connect_to(*at, 5000ms);
    EXPECT_TRUE(eventually(
        [&] {
            scrape();
            return sum_of(samples, "uringfwd_route_connections_active") == 1;
        },
        Deadline{5s}));
    UniqueFd second = connect_to(*at, 5000ms);
    EXPECT_TRUE(eventually(
        [&] {
            scrape();
            return sum_of(samples, "uringfwd_route_connections_waiting") == 1;
        },
        Deadline{5s}));

    const std::string body = scrape_metrics(*port, Deadline{5s});
    const std::string path =
        ::testing::TempDir() + "uring-fwd-health-" + std::to_string(::getpid()) + ".prom";
    std::ofstream(path, std::ios::trunc) << body;
    const CommandResult r = run(promtool + " check metrics < " + path);
    ::unlink(path.c_str());
    EXPECT_EQ(r.status, 0) << "promtool check metrics:\n" << r.output;
    EXPECT_EQ(r.output, "") << "promtool check metrics:\n" << r.output;

    samples = parse_samples(body);
    EXPECT_EQ(sum_of(samples, "uringfwd_upstream_health_check_up", up_member), 1) << body;
    EXPECT_EQ(sum_of(samples, "uringfwd_upstream_health_check_up", down_member), 0) << body;
    EXPECT_EQ(sum_of(samples, "uringfwd_upstream_health_check_failures_total", up_member), 0)
        << body;
    EXPECT_GE(sum_of(samples, "uringfwd_upstream_health_check_failures_total", down_member), 1)
        << body;
    EXPECT_GE(sum_of(samples, "uringfwd_upstream_health_checks_total", down_member),
              sum_of(samples, "uringfwd_upstream_health_check_failures_total", down_member))
        << body;
    EXPECT_EQ(sum_of(samples, "uringfwd_route_connections_waiting", "route=\"web\""), 1) << body;
    EXPECT_EQ(sum_of(samples, "uringfwd_route_connections_active", "route=\"web\""), 1) << body;

    // The waiting client is let in once the first closes.
    open.reset();
    const ExchangeResult later = exchange(second, source_plan(64, 6), Deadline{5s});
    EXPECT_TRUE(ReceivedPayload(later, 6, 64)) << later.describe();
}

} // namespace
} // namespace uringfwd::test
