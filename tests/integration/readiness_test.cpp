// The orchestrator's probes on the metrics address: GET /ready is 200 once every shard
// accepts and 503 while the process drains (after SIGTERM), GET /live 200 throughout.
#include "tests/support/binary_process.hpp"
#include "tests/support/echo_server.hpp"
#include "tests/support/eventually.hpp"
#include "tests/support/metrics_scrape.hpp"
#include "tests/support/sockets.hpp"

#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

TEST(Readiness, ReadyWhileServingNotWhileDrainingLiveThroughout) {
    EchoServer echo;
    RunningBinary fwd =
        start_binary("127.0.0.1:0", echo.endpoint(),
                     {"--shards", "2", "--metrics", "127.0.0.1:0", "--drain-timeout", "20s"});
    const auto port = metrics_port(*fwd.process, Deadline{5s});
    ASSERT_TRUE(port.has_value()) << fwd.process->stderr_text();
    EXPECT_TRUE(eventually([&] { return http_status(*port, "/ready", Deadline{5s}) == 200; },
                           Deadline{5s}));
    EXPECT_EQ(http_status(*port, "/live", Deadline{5s}), 200);
    EXPECT_EQ(http_status(*port, "/readyz", Deadline{5s}), 404);
    EXPECT_EQ(http_status(*port, "/ready/x", Deadline{5s}), 404);

    // A held connection keeps the drain going while we look.
    UniqueFd held = connect_to(fwd.endpoint);
    ASSERT_TRUE(eventually([&] { return echo.open_connections() == 1; }, Deadline{5s}));
    fwd.process->signal(SIGTERM);
    EXPECT_TRUE(
        eventually([&] { return http_status(*port, "/ready", Deadline{5s}) == 503; }, Deadline{5s}))
        << fwd.process->stderr_text();
    EXPECT_EQ(http_status(*port, "/live", Deadline{5s}), 200);
    held.reset();
    const std::optional<ExitStatus> status = fwd.process->wait_exit(Deadline{10s});
    ASSERT_TRUE(status);
    EXPECT_EQ(status->code, 0);
}

} // namespace
} // namespace uringfwd::test
