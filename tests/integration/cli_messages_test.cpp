// What the binary says: every line of its own in the engine's format (time, level,
// "uring-fwd: "), counts in the right number, and the exit said in one line.
#include "tests/support/binary_process.hpp"
#include "tests/support/echo_server.hpp"
#include "tests/support/proc_stats.hpp"
#include "tests/support/scripted_peer.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/temp_config_file.hpp"

#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

// "listening on ..." has been printed: the start line.
std::unique_ptr<BinaryProcess> started(std::vector<std::string> args) {
    auto fwd = std::make_unique<BinaryProcess>(uring_fwd_binary(), std::move(args));
    EXPECT_TRUE(fwd->wait_listening(Deadline{10s})) << fwd->stderr_text();
    return fwd;
}

// Where a started process listens (read again from its start line).
std::optional<Endpoint> listening_endpoint(BinaryProcess& process) {
    return process.wait_listening(Deadline{1s});
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
        if (!line.empty())
            out.push_back(line);
    return out;
}

// The engine's format (support/logger.cpp): UTC time to the millisecond, the level,
// who says it.
const std::regex kLogLine{
    R"(^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (error|warn|info|debug) [a-z0-9 -]+: .+$)"};

void expect_every_line_formatted(const std::string& err) {
    for (const std::string& line : lines_of(err))
        EXPECT_TRUE(std::regex_match(line, kLogLine)) << "not in the log format: " << line;
}

bool stderr_has(BinaryProcess& process, const std::string& text) {
    return eventually([&] { return process.stderr_text().find(text) != std::string::npos; },
                      Deadline{5s});
}

std::string one_route(const Endpoint& upstream) {
    return "[[route]]\nname = \"web\"\nlisten = \"127.0.0.1:0\"\nidle_timeout = \"1m\"\n"
           "[[route.upstream]]\naddress = \"" +
           upstream.to_string() + "\"\n";
}

// Start, SIGUSR1, a good and a broken SIGHUP, SIGTERM and the exit: each line of the
// binary's own carries a time and a level, as the engine's lines do, and the last one
// says why it exits and with which status.
TEST(CliMessages, EveryLineOfTheProcessHasATimeAndALevel) {
    EchoServer echo;
    const ConfigFile file{one_route(echo.endpoint())};
    auto fwd = started({"--config", file.path(), "--shards", "1"});
    fwd->signal(SIGUSR1);
    ASSERT_TRUE(stderr_has(*fwd, "uring-fwd: total: ")) << fwd->stderr_text();
    fwd->signal(SIGHUP);
    ASSERT_TRUE(stderr_has(*fwd, "SIGHUP: reloaded")) << fwd->stderr_text();
    file.write("[[route]]\nname = \"web\"\nlisten = 5\n[[route.upstream]]\naddress = \"" +
               echo.endpoint().to_string() + "\"\n");
    fwd->signal(SIGHUP);
    ASSERT_TRUE(stderr_has(*fwd, "still serving")) << fwd->stderr_text();
    fwd->signal(SIGTERM);
    const auto status = fwd->wait_exit(Deadline{10s});
    ASSERT_TRUE(status && status->exited && status->code == 0) << fwd->stderr_text();
    std::this_thread::sleep_for(50ms);

    const std::string err = fwd->stderr_text();
    expect_every_line_formatted(err);
    EXPECT_NE(err.find("info uring-fwd: shard 0 cpu "), std::string::npos) << err;
    EXPECT_NE(err.find("info uring-fwd: SIGHUP: reloaded " + file.path()), std::string::npos)
        << err;
    EXPECT_NE(err.find("error uring-fwd: SIGHUP: " + file.path() + ":3: "), std::string::npos)
        << err;
    EXPECT_NE(err.find("SIGHUP: " + file.path() +
                       " has 1 error; still serving the configuration loaded before"),
              std::string::npos)
        << err;
    const std::vector<std::string> lines = lines_of(err);
    ASSERT_FALSE(lines.empty());
    EXPECT_NE(lines.back().find(
                  "info uring-fwd: exit status 0: stopped by SIGTERM; every connection finished"),
              std::string::npos)
        << err;
}

// A drain that runs out says so in the exit line.
TEST(CliMessages, TheExitLineCountsWhatTheDrainReset) {
    SilentServer upstream;
    auto fwd = started({"--listen", "127.0.0.1:0", "--upstream", upstream.endpoint().to_string(),
                        "--drain-timeout", "200ms", "--shards", "1"});
    const std::optional<Endpoint> at = listening_endpoint(*fwd);
    ASSERT_TRUE(at) << fwd->stderr_text();
    UniqueFd client = connect_to(*at);
    ASSERT_TRUE(eventually([&] { return upstream.accepted() == 1; }, Deadline{5s}));
    fwd->signal(SIGINT);
    const auto status = fwd->wait_exit(Deadline{10s});
    ASSERT_TRUE(status && status->exited && status->code == 0) << fwd->stderr_text();
    std::this_thread::sleep_for(50ms);
    const std::string err = fwd->stderr_text();
    expect_every_line_formatted(err);
    EXPECT_NE(err.find("info uring-fwd: SIGINT: no new connections; open ones may finish "
                       "within 200ms"),
              std::string::npos)
        << err;
    EXPECT_NE(err.find("info shard 0: stopping: waiting up to 200 ms for 1 connection to finish"),
              std::string::npos)
        << err;
    EXPECT_NE(lines_of(err).back().find("exit status 0: stopped by SIGINT; 1 connection reset "
                                        "(1 at the drain timeout, 0 by a second signal)"),
              std::string::npos)
        << err;
}

// A start that fails says why in one line of the same format.
TEST(CliMessages, AFailedStartIsOneErrorLineInTheLogFormat) {
    const Listener taken = listen_loopback(Family::Inet4);
    BinaryProcess fwd{uring_fwd_binary(),
                      {"--listen", taken.endpoint().to_string(), "--upstream", "127.0.0.1:1"}};
    const auto status = fwd.wait_exit(Deadline{10s});
    ASSERT_TRUE(status && status->exited && status->code == 1) << fwd.stderr_text();
    std::this_thread::sleep_for(50ms);
    const std::string err = fwd.stderr_text();
    ASSERT_EQ(lines_of(err).size(), 1u) << err;
    expect_every_line_formatted(err);
    EXPECT_NE(err.find(" error uring-fwd: cannot listen on " + taken.endpoint().to_string()),
              std::string::npos)
        << err;
}

// A refused upstream fails every client: 5 lines a second get through, and the next one
// after the window counts the others in the words every throttled message ends with.
TEST(CliMessages, AThrottledMessageSaysHowManyMoreWereSuppressed) {
    Listener closed = listen_loopback(Family::Inet4);
    const Endpoint refused = closed.endpoint();
    closed = Listener{}; // nothing listens there now: every connect is refused
    auto fwd =
        started({"--listen", "127.0.0.1:0", "--upstream", refused.to_string(), "--shards", "1"});
    const std::optional<Endpoint> at = listening_endpoint(*fwd);
    ASSERT_TRUE(at) << fwd->stderr_text();
    // Reset at once, perhaps before its connect completes on this side.
    const auto reset_client = [&] {
        UniqueFd client;
        if (try_connect(*at, 5000ms, client) == 0)
            recv_until_eof(client.get(), Deadline{5s});
    };
    for (int i = 0; i < 12; ++i)
        reset_client();
    std::this_thread::sleep_for(1100ms); // the throttle's window (support/log_throttle.hpp)
    reset_client();
    ASSERT_TRUE(stderr_has(*fwd, " more suppressed)")) << fwd->stderr_text();
    const std::string err = fwd->stderr_text();
    EXPECT_EQ(err.find("not logged"), std::string::npos) << err;
    expect_every_line_formatted(err);
}

// idle_timeout defaults to never, and a client that goes silent then holds its
// upstream connection for ever: the start warns once, naming each route without one
// and how to set it (HAProxy warns so about missing timeouts), and --check says it too.
TEST(CliMessages, RoutesWithoutAnIdleTimeoutAreNamedInOneWarning) {
    EchoServer echo;
    const auto route = [&](const std::string& name, const std::string& extra) {
        return "[[route]]\nname = \"" + name + "\"\nlisten = \"127.0.0.1:0\"\n" + extra +
               "[[route.upstream]]\naddress = \"" + echo.endpoint().to_string() + "\"\n";
    };
    const ConfigFile file{route("quiet", "") + route("timed", "idle_timeout = \"5m\"\n") +
                          route("still", "")};
    const std::string warning =
        "routes \"quiet\", \"still\" have no idle timeout: a client that goes silent holds its "
        "upstream connection for ever; set idle_timeout = \"10m\", say, or \"24h\" where "
        "connections are quiet by design, in their [[route]] sections";
    auto fwd = started({"--config", file.path(), "--shards", "1"});
    // Logged just after the start line.
    ASSERT_TRUE(stderr_has(*fwd, "no idle timeout")) << fwd->stderr_text();
    std::string err = fwd->stderr_text();
    EXPECT_NE(err.find(" warn uring-fwd: " + warning + "\n"), std::string::npos) << err;
    EXPECT_EQ(err.find("no idle timeout"), err.rfind("no idle timeout")) << "once: " << err;
    EXPECT_EQ(err.find("\"timed\""), std::string::npos) << err;

    BinaryProcess check{uring_fwd_binary(), {"--config", file.path(), "--check"}};
    const auto status = check.wait_exit(Deadline{5s});
    ASSERT_TRUE(status && status->exited && status->code == 0) << check.stderr_text();
    std::this_thread::sleep_for(50ms);
    EXPECT_EQ(check.stderr_text(), file.path() + ": warning: " + warning + "\n");

    // From the flags, the flag to give.
    auto flags = started(
        {"--listen", "127.0.0.1:0", "--upstream", echo.endpoint().to_string(), "--shards", "1"});
    ASSERT_TRUE(stderr_has(*flags, "no idle timeout")) << flags->stderr_text();
    err = flags->stderr_text();
    EXPECT_NE(err.find(" warn uring-fwd: route \"default\" has no idle timeout: a client that "
                       "goes silent holds its upstream connection for ever; give --idle-timeout "
                       "10m, say, or 24h where connections are quiet by design\n"),
              std::string::npos)
        << err;
    auto timed = started({"--listen", "127.0.0.1:0", "--upstream", echo.endpoint().to_string(),
                          "--shards", "1", "--idle-timeout", "1h"});
    timed->signal(SIGTERM); // whatever it logs at start is out once it has exited
    ASSERT_TRUE(timed->wait_exit(Deadline{10s})) << timed->stderr_text();
    std::this_thread::sleep_for(50ms);
    err = timed->stderr_text();
    EXPECT_EQ(err.find("idle timeout"), std::string::npos) << err;
}

// --log-level quiets the engine, not the process's own lines: scripts (and these
// tests) wait for the start line, and an operator wants the exit said.
TEST(CliMessages, TheProcessLinesAreWrittenAtAnyLogLevel) {
    EchoServer echo;
    auto fwd = started({"--listen", "127.0.0.1:0", "--upstream", echo.endpoint().to_string(),
                        "--shards", "1", "--log-level", "error", "--idle-timeout", "1m"});
    fwd->signal(SIGTERM);
    ASSERT_TRUE(fwd->wait_exit(Deadline{10s})) << fwd->stderr_text();
    std::this_thread::sleep_for(50ms);
    const std::string err = fwd->stderr_text();
    EXPECT_NE(err.find(" info uring-fwd: version "), std::string::npos) << err;
    EXPECT_NE(err.find(" info uring-fwd: exit status 0: stopped by SIGTERM"), std::string::npos)
        << err;
}

TEST(CliMessages, StartLineCountsOneShardInTheSingular) {
    EchoServer echo;
    auto fwd = started(
        {"--listen", "127.0.0.1:0", "--upstream", echo.endpoint().to_string(), "--shards", "1"});
    const std::string err = fwd->stderr_text();
    EXPECT_NE(err.find("; 1 shard (node "), std::string::npos) << err;
    EXPECT_EQ(err.find("1 shards"), std::string::npos) << err;
}

} // namespace
} // namespace uringfwd::test
