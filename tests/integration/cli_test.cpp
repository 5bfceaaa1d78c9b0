// The binary's command line: mistakes end it at once with one line on stderr and a
// non-zero status; signals end it cleanly with status 0.
#include "tests/support/binary_process.hpp"
#include "tests/support/exchange.hpp"
#include "tests/support/proc_stats.hpp"
#include "tests/support/scripted_peer.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/temp_config_file.hpp"
#include "tests/support/transfer_checks.hpp"
#include "uringfwd/version.hpp"

#include <gtest/gtest.h>

#include <signal.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#ifndef URING_FWD_EXAMPLE_CONFIG
#error "URING_FWD_EXAMPLE_CONFIG must name examples/uring-fwd.toml (set by tests/meson.build)"
#endif

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

std::vector<std::string> non_empty_lines(const std::string& text) {
    std::vector<std::string> lines;
    std::size_t begin = 0;
    while (begin <= text.size()) {
        std::size_t end = text.find('\n', begin);
        if (end == std::string::npos) {
            end = text.size();
        }
        std::string line = text.substr(begin, end - begin);
        if (line.find_first_not_of(" \t\r") != std::string::npos) {
            lines.push_back(std::move(line));
        }
        begin = end + 1;
    }
    return lines;
}

struct Outcome {
    ExitStatus status;
    std::string err;
};

// Runs the binary with `args`, expecting it to exit on its own within 5 s.
Outcome run_to_exit(std::vector<std::string> args) {
    BinaryProcess proc{uring_fwd_binary(), std::move(args)};
    const auto status = proc.wait_exit(Deadline{5s});
    if (!status) {
        ADD_FAILURE() << "still running after 5 s; stderr:\n" << proc.stderr_text();
        return {};
    }
    // Let the drain thread collect the last of stderr (the pipe is closed by now).
    std::this_thread::sleep_for(50ms);
    return {*status, proc.stderr_text()};
}

void expect_one_line_error(const Outcome& out, const std::string& must_mention) {
    EXPECT_TRUE(out.status.exited && out.status.code != 0) << out.status.describe();
    const auto lines = non_empty_lines(out.err);
    EXPECT_EQ(lines.size(), 1u) << "stderr:\n" << out.err;
    std::string lower = out.err;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    EXPECT_NE(lower.find(must_mention), std::string::npos)
        << "expected the message to mention \"" << must_mention << "\"; stderr:\n"
        << out.err;
}

TEST(Cli, UnknownFlagFails) {
    expect_one_line_error(
        run_to_exit({"--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:1", "--no-such-flag"}),
        "no-such-flag");
}

TEST(Cli, MissingUpstreamFails) {
    expect_one_line_error(run_to_exit({"--listen", "127.0.0.1:0"}), "upstream");
}

TEST(Cli, BadAddressFails) {
    expect_one_line_error(run_to_exit({"--listen", "not-an-address", "--upstream", "127.0.0.1:1"}),
                          "listen");
}

TEST(Cli, PortOutOfRangeFails) {
    expect_one_line_error(run_to_exit({"--listen", "127.0.0.1:70000", "--upstream", "127.0.0.1:1"}),
                          "listen");
}

TEST(Cli, PortInUseFails) {
    const Listener taken = listen_loopback(Family::Inet4);
    expect_one_line_error(
        run_to_exit({"--listen", taken.endpoint().to_string(), "--upstream", "127.0.0.1:1"}),
        "in use");
}

TEST(Cli, UnknownDataPathFails) {
    expect_one_line_error(run_to_exit({"--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:1",
                                       "--data-path", "zerocopy"}),
                          "data-path");
}

TEST(Cli, CopyBuffersNotAPowerOfTwoFails) {
    expect_one_line_error(run_to_exit({"--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:1",
                                       "--data-path", "copy", "--copy-buffers", "100"}),
                          "power of two");
}

TEST(Cli, BusyPollWithAWrongUnitFails) {
    expect_one_line_error(
        run_to_exit({"--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:1", "--busy-poll", "5s"}),
        "busy-poll");
}

// Each --data-path serves, and the start-up line says which one is in use.
TEST(Cli, StartupLineNamesTheDataPath) {
    for (const char* path : {"splice", "copy", "auto"}) {
        ScriptedPeer sink{sink_plan()};
        RunningBinary fwd = start_binary("127.0.0.1:0", sink.endpoint(), {"--data-path", path});
        UniqueFd client = connect_to(fwd.endpoint);
        ExchangePlan plan;
        plan.send_bytes = 100000;
        plan.send_seed = 3;
        EXPECT_TRUE(SentAll(exchange(client, plan, Deadline{10s}), 100000)) << path;
        const auto theirs = sink.wait_result(Deadline{10s});
        ASSERT_TRUE(theirs.has_value()) << path;
        EXPECT_TRUE(ReceivedPayload(*theirs, 3, 100000)) << path;
        EXPECT_NE(fwd.process->stderr_text().find(std::string("data path ") + path),
                  std::string::npos)
            << fwd.process->stderr_text();
    }
}

TEST(Cli, ConfigCheckAcceptsTheExample) {
    BinaryProcess proc{uring_fwd_binary(), {"--config", URING_FWD_EXAMPLE_CONFIG, "--check"}};
    const auto status = proc.wait_exit(Deadline{5s});
    ASSERT_TRUE(status.has_value());
    std::this_thread::sleep_for(50ms);
    EXPECT_TRUE(status->exited && status->code == 0) << status->describe() << "; stderr:\n"
                                                     << proc.stderr_text();
    const auto lines = non_empty_lines(proc.stdout_text());
    ASSERT_EQ(lines.size(), 2u) << proc.stdout_text();
    EXPECT_EQ(lines[0], std::string(URING_FWD_EXAMPLE_CONFIG) + ": ok");
    EXPECT_EQ(lines[1].rfind("5 routes: web on 127.0.0.1:8080, [::1]:8080 -> 3 upstreams", 0), 0u)
        << lines[1];
    EXPECT_NE(lines[1].find("tls-grpc on :8443 for app.example.com, alpn h2 -> 1 upstream"),
              std::string::npos)
        << lines[1];
    // No warning either: every route of the example has an idle_timeout.
    EXPECT_EQ(proc.stderr_text(), "");
}

// Engine flags beside --config are fine (they override its [engine] values).
TEST(Cli, ConfigCheckTakesEngineFlags) {
    const Outcome out = run_to_exit(
        {"--config", URING_FWD_EXAMPLE_CONFIG, "--check", "--shards", "1", "--data-path", "copy"});
    EXPECT_TRUE(out.status.exited && out.status.code == 0) << out.status.describe() << "; stderr:\n"
                                                           << out.err;
}

// Every error of the file, one FILE:LINE: line each, and status 1.
TEST(Cli, ConfigCheckReportsEveryError) {
    const ConfigFile file{"[engine]\n"
                          "shards = -1\n"
                          "[[route]]\n"
                          "name = \"web\"\n"
                          "listen = \"127.0.0.1:8080\"\n"
                          "balanse = \"maglev\"\n"
                          "  [[route.upstream]]\n"
                          "  address = \"127.0.0.1:9001\"\n"
                          "  weight = 0\n"};
    const Outcome out = run_to_exit({"--config", file.path(), "--check"});
    EXPECT_TRUE(out.status.exited && out.status.code == 1) << out.status.describe();
    const std::string& f = file.path();
    EXPECT_EQ(non_empty_lines(out.err),
              (std::vector<std::string>{
                  f + ":2: [engine] shards must be 0..4096, not -1",
                  f + ":6: route \"web\": unknown key 'balanse' in [[route]] (did you mean "
                      "'balance'?)",
                  f + ":9: route \"web\": upstream weight must be 1..1000, not 0"}));
}

// Without --check a broken file stops the binary the same way, before it starts.
TEST(Cli, ConfigWithErrorsDoesNotStart) {
    const ConfigFile file{"[[route]]\nname = \"web\"\n"};
    const Outcome out = run_to_exit({"--config", file.path()});
    EXPECT_TRUE(out.status.exited && out.status.code == 1) << out.status.describe();
    EXPECT_EQ(non_empty_lines(out.err),
              (std::vector<std::string>{
                  file.path() + ":1: route \"web\": listen is required: an address, or an "
                                "array of them",
                  file.path() + ":1: route \"web\": needs at least one upstream "
                                "([[route.upstream]] with an address)"}));
}

// --check looks every name up as a start does (the issue: it said "ok" for a host
// that cannot resolve), and the start reports it at the same line.
TEST(Cli, ConfigCheckResolvesNamesAsAStartWould) {
    const ConfigFile file{
        "[[route]]\n"
        "name = \"d\"\n"
        "listen = [\"127.0.0.1:0\",\n"
        "  {address = \"unix:/tmp/uringfwd-x.sock\", user = \"no-such-user-uringfwd\"}]\n"
        "  [[route.upstream]]\n"
        "  address = \"localhost:9101\"\n"
        "  [[route.upstream]]\n"
        "  address = \"nosuchhost.invalid:9103\"\n"};
    const std::string& f = file.path();
    for (const bool check : {true, false}) {
        std::vector<std::string> args{"--config", f};
        if (check)
            args.push_back("--check");
        const Outcome out = run_to_exit(args);
        EXPECT_TRUE(out.status.exited && out.status.code == 1) << out.status.describe();
        const std::vector<std::string> lines = non_empty_lines(out.err);
        ASSERT_EQ(lines.size(), 2u) << out.err;
        EXPECT_EQ(lines[0], f + ":4: route \"d\": listen \"unix:/tmp/uringfwd-x.sock\": no user "
                                "named \"no-such-user-uringfwd\"");
        EXPECT_EQ(lines[1].rfind(f + ":8: route \"d\": upstream address "
                                     "\"nosuchhost.invalid:9103\": cannot resolve "
                                     "nosuchhost.invalid: ",
                                 0),
                  0u)
            << lines[1];
    }
}

TEST(Cli, ConfigFileMissingFails) {
    expect_one_line_error(run_to_exit({"--config", "/nonexistent/uring-fwd.toml", "--check"}),
                          "cannot read");
}

TEST(Cli, ConfigWithListenFails) {
    expect_one_line_error(
        run_to_exit({"--config", URING_FWD_EXAMPLE_CONFIG, "--listen", "127.0.0.1:0"}),
        "is a route setting: with --config, use listen in the route's [[route]] section");
}

TEST(Cli, CheckWithoutConfigFails) {
    expect_one_line_error(
        run_to_exit({"--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:1", "--check"}),
        "--check needs --config");
}

TEST(Cli, VersionPrintsAndExitsZero) {
    BinaryProcess proc{uring_fwd_binary(), {"--version"}};
    const auto status = proc.wait_exit(Deadline{5s});
    ASSERT_TRUE(status.has_value());
    EXPECT_TRUE(status->exited && status->code == 0) << status->describe();
    std::this_thread::sleep_for(50ms);
    // The library's version (uringfwd::version()), the project's version in meson.build.
    EXPECT_NE(proc.stdout_text().find("uring-fwd " URINGFWD_VERSION_STRING), std::string::npos)
        << "stdout: " << proc.stdout_text();
}

class CliSignal : public ::testing::TestWithParam<int> {};

// With nothing open, SIGINT/SIGTERM end the binary at once with status 0.
TEST_P(CliSignal, ExitsZeroWhenIdle) {
    ScriptedPeer sink{sink_plan()};
    RunningBinary fwd = start_binary("127.0.0.1:0", sink.endpoint());
    fwd.process->signal(GetParam());
    const auto status = fwd.process->wait_exit(Deadline{5s});
    ASSERT_TRUE(status.has_value()) << "did not exit within 5 s of the signal; stderr:\n"
                                    << fwd.process->stderr_text();
    EXPECT_TRUE(status->exited && status->code == 0) << status->describe();
}

INSTANTIATE_TEST_SUITE_P(Signals, CliSignal, ::testing::Values(SIGINT, SIGTERM),
                         [](const ::testing::TestParamInfo<int>& info) {
                             return std::string(info.param == SIGINT ? "SIGINT" : "SIGTERM");
                         });

// Connects through `fwd` and waits until the upstream has accepted, so the connection
// exists end to end before the test signals the binary.
UniqueFd connect_end_to_end(const RunningBinary& fwd, const ScriptedPeer& peer,
                            uint64_t accepted_before) {
    UniqueFd client = connect_to(fwd.endpoint);
    EXPECT_TRUE(eventually([&] { return peer.accepted() > accepted_before; }, Deadline{5s}))
        << "the upstream never saw the connection";
    return client;
}

// The first SIGTERM stops accepting but lets an open connection finish its transfer;
// the binary exits 0 once it has.
TEST(Cli, SigtermDrainsOpenConnectionThenExitsZero) {
    constexpr uint64_t kSize = 1024 * 1024;
    ScriptedPeer sink{sink_plan()};
    RunningBinary fwd = start_binary("127.0.0.1:0", sink.endpoint());
    UniqueFd client = connect_end_to_end(fwd, sink, 0);

    fwd.process->signal(SIGTERM);
    std::this_thread::sleep_for(100ms);
    UniqueFd late;
    EXPECT_NE(try_connect(fwd.endpoint, 1000ms, late), 0)
        << "still accepting new connections after SIGTERM";

    ExchangePlan plan;
    plan.send_bytes = kSize;
    plan.send_seed = 111;
    const ExchangeResult mine = exchange(client, plan, Deadline{10s});
    EXPECT_TRUE(SentAll(mine, kSize));
    EXPECT_EQ(mine.recv_status, IoStatus::Eof) << mine.describe();
    const auto theirs = sink.wait_result(Deadline{5s});
    ASSERT_TRUE(theirs.has_value());
    EXPECT_TRUE(ReceivedPayload(*theirs, 111, kSize));

    const auto status = fwd.process->wait_exit(Deadline{5s});
    ASSERT_TRUE(status.has_value()) << "did not exit after the drain; stderr:\n"
                                    << fwd.process->stderr_text();
    EXPECT_TRUE(status->exited && status->code == 0) << status->describe();
}

// A second signal does not wait for the drain: open connections are reset and the
// binary exits 0.
TEST(Cli, SecondSignalResetsOpenConnectionsAndExitsZero) {
    SilentServer upstream;
    BinaryProcess proc{uring_fwd_binary(),
                       {"--listen", "127.0.0.1:0", "--upstream", upstream.endpoint().to_string(),
                        "--drain-timeout", "60s"}};
    const auto endpoint = proc.wait_listening(Deadline{10s});
    ASSERT_TRUE(endpoint.has_value()) << proc.stderr_text();
    UniqueFd client = connect_to(*endpoint);
    ASSERT_TRUE(eventually([&] { return upstream.accepted() == 1; }, Deadline{5s}));

    proc.signal(SIGTERM);
    std::this_thread::sleep_for(200ms);
    proc.signal(SIGTERM);
    const auto status = proc.wait_exit(Deadline{5s});
    ASSERT_TRUE(status.has_value()) << "second SIGTERM did not end it within 5 s; stderr:\n"
                                    << proc.stderr_text();
    EXPECT_TRUE(status->exited && status->code == 0) << status->describe();
    EXPECT_TRUE(recv_until_eof(client.get(), Deadline{5s}).ended_by_peer());
}

// --drain-timeout bounds the drain: an idle connection that never finishes is reset
// after it and the binary exits 0.
TEST(Cli, DrainTimeoutEndsIdleConnection) {
    SilentServer upstream;
    BinaryProcess proc{uring_fwd_binary(),
                       {"--listen", "127.0.0.1:0", "--upstream", upstream.endpoint().to_string(),
                        "--drain-timeout", "500ms"}};
    const auto endpoint = proc.wait_listening(Deadline{10s});
    ASSERT_TRUE(endpoint.has_value()) << proc.stderr_text();
    UniqueFd client = connect_to(*endpoint);
    ASSERT_TRUE(eventually([&] { return upstream.accepted() == 1; }, Deadline{5s}));

    const auto start = Clock::now();
    proc.signal(SIGTERM);
    const auto status = proc.wait_exit(Deadline{5s});
    ASSERT_TRUE(status.has_value()) << "not gone 5 s after SIGTERM with a 500 ms drain; stderr:\n"
                                    << proc.stderr_text();
    EXPECT_TRUE(status->exited && status->code == 0) << status->describe();
    EXPECT_GE(Clock::now() - start, 400ms) << "exited before the drain timeout";
    EXPECT_TRUE(recv_until_eof(client.get(), Deadline{5s}).ended_by_peer());
}

} // namespace
} // namespace uringfwd::test
