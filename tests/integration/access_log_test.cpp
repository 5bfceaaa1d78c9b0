// The binary's access log (--access-log, --access-log-format): one line per closed
// connection with exact values, JSON that parses, a reopen on SIGUSR2 that loses
// nothing, and a churn burst whose every connection is either logged or counted as
// dropped.
#include "tests/support/binary_process.hpp"
#include "tests/support/echo_server.hpp"
#include "tests/support/eventually.hpp"
#include "tests/support/exchange.hpp"
#include "tests/support/flat_json.hpp"
#include "tests/support/metrics_scrape.hpp"
#include "tests/support/proc_stats.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/temp_config_file.hpp"
#include "tests/support/transfer_checks.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

// A fresh path under the test temp directory, removed (with its rotated twin) after.
class LogPath {
public:
    LogPath()
        : path_(::testing::TempDir() + "uring-fwd-access-" + std::to_string(::getpid()) + "-" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".log") {
        remove();
    }
    ~LogPath() { remove(); }
    const std::string& path() const { return path_; }
    std::string rotated() const { return path_ + ".1"; }

private:
    void remove() const {
        ::unlink(path_.c_str());
        ::unlink(rotated().c_str());
    }
    std::string path_;
};

std::vector<std::string> lines_of(const std::string& path) {
    std::ifstream in(path);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);)
        lines.push_back(line);
    return lines;
}

// Sends `bytes` through the forwarder to the echo server and reads them back.
void echo_through(const Endpoint& proxy, uint64_t bytes, uint64_t seed, std::string* client_addr) {
    UniqueFd client = connect_to(proxy);
    if (client_addr != nullptr) {
        sockaddr_storage ss{};
        socklen_t len = sizeof ss;
        ::getsockname(client.get(), reinterpret_cast<sockaddr*>(&ss), &len);
        const auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
        *client_addr = fmt::format("127.0.0.1:{}", ntohs(in->sin_port));
    }
    const ExchangeResult r = exchange(client, source_plan(bytes, seed), Deadline{10s});
    ASSERT_TRUE(ReceivedPayload(r, seed, bytes)) << r.describe();
}

// SIGTERM, then the exit: every line is written once the binary has exited.
void stop(BinaryProcess& fwd) {
    fwd.signal(SIGTERM);
    const auto status = fwd.wait_exit(Deadline{10s});
    ASSERT_TRUE(status.has_value()) << fwd.stderr_text();
    EXPECT_TRUE(status->exited && status->code == 0) << status->describe();
}

TEST(AccessLog, JsonLinesHoldExactValuesAndCloseReasons) {
    EchoServer echo;
    ReservedPort refusing = reserve_refusing_port();
    const std::string refused_socket = unique_unix_path("refused");
    LogPath log;
    const ConfigFile file{fmt::format(
        "[engine]\nshards = 2\naccess_log = \"{}\"\naccess_log_format = \"json\"\n"
        "[[route]]\nname = \"echo\"\nlisten = \"127.0.0.1:0\"\n"
        "  [[route.upstream]]\n  address = \"{}\"\n"
        "[[route]]\nname = \"nowhere\"\nlisten = \"unix:{}\"\n"
        "  [[route.upstream]]\n  address = \"{}\"\n",
        log.path(), echo.endpoint().to_string(), refused_socket, refusing.endpoint.to_string())};
    BinaryProcess fwd{uring_fwd_binary(), {"--config", file.path()}};
    const auto proxy = fwd.wait_listening(Deadline{10s});
    ASSERT_TRUE(proxy.has_value()) << fwd.stderr_text();

    constexpr int kClean = 4;
    std::map<std::string, uint64_t> sent; // client address -> bytes each way
    for (int i = 0; i < kClean; ++i) {
        std::string client;
        const uint64_t bytes = 1000 * (i + 1) + 7;
        echo_through(*proxy, bytes, 20 + i, &client);
        sent[client] = bytes;
    }
    constexpr int kRefused = 2;
    for (int i = 0; i < kRefused; ++i) {
        UniqueFd client = connect_to(Endpoint::parse("unix:" + refused_socket));
        const IoResult end = recv_until_eof(client.get(), Deadline{10s});
        EXPECT_TRUE(end.ended_by_peer()) << to_string(end.status);
    }
    stop(fwd);

    const std::vector<std::string> lines = lines_of(log.path());
    ASSERT_EQ(lines.size(), static_cast<std::size_t>(kClean + kRefused));
    int clean = 0;
    int refused = 0;
    for (const std::string& line : lines) {
        const auto fields = parse_flat_json(line);
        ASSERT_TRUE(fields.has_value()) << "not a flat JSON object: " << line;
        const auto& f = *fields;
        for (const char* key : {"time", "route", "client", "upstream", "bytes_to_upstream",
                                "bytes_to_client", "connect_us", "duration_us", "reason", "error"})
            ASSERT_TRUE(f.count(key)) << key << " missing: " << line;
        EXPECT_EQ(f.at("time").text.size(), std::string("2026-12-01T13:05:01.123456Z").size());
        if (f.at("route").text == "echo") {
            ++clean;
            ASSERT_TRUE(sent.count(f.at("client").text)) << line;
            const std::string bytes = std::to_string(sent.at(f.at("client").text));
            EXPECT_EQ(f.at("upstream").text, echo.endpoint().to_string());
            EXPECT_EQ(f.at("bytes_to_upstream").text, bytes) << line;
            EXPECT_EQ(f.at("bytes_to_client").text, bytes) << line;
            EXPECT_EQ(f.at("reason").text, "clean");
            EXPECT_EQ(f.at("error").kind, JsonValue::Kind::Null);
            EXPECT_GT(std::stoll(f.at("connect_us").text), 0) << line;
            EXPECT_GE(std::stoll(f.at("duration_us").text), std::stoll(f.at("connect_us").text));
        } else {
            ++refused;
            EXPECT_EQ(f.at("route").text, "nowhere");
            EXPECT_EQ(f.at("client").kind, JsonValue::Kind::Null) << line; // unnamed unix peer
            // The member that refused (issue 20: it said null).
            EXPECT_EQ(f.at("upstream").text, refusing.endpoint.to_string()) << line;
            EXPECT_EQ(f.at("bytes_to_upstream").text, "0");
            EXPECT_EQ(f.at("bytes_to_client").text, "0");
            EXPECT_EQ(f.at("connect_us").text, "0");
            EXPECT_EQ(f.at("reason").text, "refused");
            EXPECT_EQ(f.at("error").text, "ECONNREFUSED");
        }
    }
    EXPECT_EQ(clean, kClean);
    EXPECT_EQ(refused, kRefused);
}

TEST(AccessLog, TextLinesToStderr) {
    EchoServer echo;
    RunningBinary fwd =
        start_binary("127.0.0.1:0", echo.endpoint(), {"--shards", "1", "--access-log", "-"});
    std::string client;
    echo_through(fwd.endpoint, 123, 5, &client);
    const std::string expected = fmt::format(
        " route=default client={} upstream={} bytes_to_upstream=123 bytes_to_client=123 ", client,
        echo.endpoint().to_string());
    EXPECT_TRUE(
        eventually([&] { return fwd.process->stderr_text().find(expected) != std::string::npos; },
                   Deadline{5s}))
        << fwd.process->stderr_text();
    const std::string err = fwd.process->stderr_text();
    const std::size_t at = err.find(expected);
    ASSERT_NE(at, std::string::npos);
    const std::string line =
        err.substr(err.rfind('\n', at) + 1, err.find('\n', at) - err.rfind('\n', at) - 1);
    EXPECT_NE(line.find(" reason=clean"), std::string::npos) << line;
    EXPECT_EQ(line.find(" error="), std::string::npos) << line;
    EXPECT_EQ(line[line.find(' ') - 1], 'Z') << line; // starts with the UTC time
}

TEST(AccessLog, Sigusr2ReopensAfterRenameLosingNothing) {
    EchoServer echo;
    LogPath log;
    RunningBinary fwd =
        start_binary("127.0.0.1:0", echo.endpoint(), {"--shards", "2", "--access-log", log.path()});
    constexpr int kBefore = 3;
    constexpr int kAfter = 4;
    for (int i = 0; i < kBefore; ++i)
        echo_through(fwd.endpoint, 100 + i, 40 + i, nullptr);
    // What logrotate does: rename, then signal.
    ASSERT_TRUE(eventually([&] { return lines_of(log.path()).size() == kBefore; }, Deadline{5s}));
    ASSERT_EQ(::rename(log.path().c_str(), log.rotated().c_str()), 0);
    fwd.process->signal(SIGUSR2);
    ASSERT_TRUE(eventually([&] { return ::access(log.path().c_str(), F_OK) == 0; }, Deadline{5s}))
        << "no new file after SIGUSR2";
    for (int i = 0; i < kAfter; ++i)
        echo_through(fwd.endpoint, 200 + i, 50 + i, nullptr);
    stop(*fwd.process);

    EXPECT_EQ(lines_of(log.rotated()).size(), static_cast<std::size_t>(kBefore));
    const std::vector<std::string> after = lines_of(log.path());
    ASSERT_EQ(after.size(), static_cast<std::size_t>(kAfter));
    for (int i = 0; i < kAfter; ++i)
        EXPECT_NE(std::find_if(after.begin(), after.end(),
                               [&](const std::string& l) {
                                   return l.find(fmt::format(" bytes_to_upstream={} ", 200 + i)) !=
                                          std::string::npos;
                               }),
                  after.end())
            << "the connection with " << 200 + i << " bytes";
}

// The promise behind a rotation: lines a shard has handed to the writer but the writer
// has not written yet when logrotate renames the file go to the renamed file, flushed
// there before the path is opened again, not to the new file. --access-log-flush 1h
// keeps every line of a round in memory until the SIGUSR2 (with the default 50 ms, a
// slow run, as under TSan, wrote them all before the rename and proved nothing), and
// each round renames once its burst's last connection closed in the engine (its line is
// in the writer's ring once the closed count has it).
TEST(AccessLog, LinesBufferedAtTheRenameGoToTheRenamedFile) {
    EchoServer echo;
    LogPath log;
    RunningBinary fwd = start_binary("127.0.0.1:0", echo.endpoint(),
                                     {"--shards", "1", "--access-log", log.path(),
                                      "--access-log-flush", "1h", "--metrics", "127.0.0.1:0"});
    const auto port = metrics_port(*fwd.process, Deadline{5s});
    ASSERT_TRUE(port.has_value()) << fwd.process->stderr_text();

    constexpr int kRounds = 5;
    constexpr int kBurst = 20;
    int rounds_with_buffered_lines = 0;
    for (int round = 0; round < kRounds; ++round) {
        for (int i = 0; i < kBurst; ++i)
            echo_through(fwd.endpoint, 100, 30 + i, nullptr);
        const double closed = (round + 1) * kBurst;
        ASSERT_TRUE(eventually(
            [&] {
                return sum_of(parse_samples(scrape_metrics(*port, Deadline{5s})),
                              "uringfwd_route_connections_closed_total") == closed;
            },
            Deadline{5s}, 1ms));
        const std::size_t on_disk = lines_of(log.path()).size();
        const std::string rotated = fmt::format("{}.round{}", log.path(), round);
        ASSERT_EQ(::rename(log.path().c_str(), rotated.c_str()), 0);
        fwd.process->signal(SIGUSR2);
        // The path exists again once the writer has flushed to the renamed file and
        // reopened.
        ASSERT_TRUE(
            eventually([&] { return ::access(log.path().c_str(), F_OK) == 0; }, Deadline{5s}, 1ms))
            << "no new file after SIGUSR2";
        if (on_disk == 0)
            ++rounds_with_buffered_lines;
        EXPECT_EQ(lines_of(rotated).size(), static_cast<std::size_t>(kBurst))
            << "round " << round << ": " << on_disk << " lines were on disk at the rename";
        EXPECT_EQ(lines_of(log.path()).size(), 0u) << "round " << round;
        ::unlink(rotated.c_str());
    }
    stop(*fwd.process);
    EXPECT_EQ(rounds_with_buffered_lines, kRounds)
        << "lines reached the disk before the rename although they may wait an hour";
}

// [engine] access_log_flush reaches the writer: with an hour, lines of closed
// connections stay in memory (none on disk a second after the engine counted them
// closed, where the default writes them within 50 ms), and the exit writes them all.
TEST(AccessLog, FlushIntervalFromTheFileHoldsLinesUntilTheExit) {
    EchoServer echo;
    LogPath log;
    const ConfigFile file{fmt::format("[engine]\nshards = 1\naccess_log = \"{}\"\n"
                                      "access_log_flush = \"1h\"\nmetrics = \"127.0.0.1:0\"\n"
                                      "[[route]]\nname = \"echo\"\nlisten = \"127.0.0.1:0\"\n"
                                      "  [[route.upstream]]\n  address = \"{}\"\n",
                                      log.path(), echo.endpoint().to_string())};
    BinaryProcess fwd{uring_fwd_binary(), {"--config", file.path()}};
    const auto proxy = fwd.wait_listening(Deadline{10s});
    ASSERT_TRUE(proxy.has_value()) << fwd.stderr_text();
    const auto port = metrics_port(fwd, Deadline{5s});
    ASSERT_TRUE(port.has_value()) << fwd.stderr_text();

    constexpr int kConnections = 10;
    for (int i = 0; i < kConnections; ++i)
        echo_through(*proxy, 100 + i, 70 + i, nullptr);
    ASSERT_TRUE(eventually(
        [&] {
            return sum_of(parse_samples(scrape_metrics(*port, Deadline{5s})),
                          "uringfwd_route_connections_closed_total") == kConnections;
        },
        Deadline{5s}, 1ms));
    std::this_thread::sleep_for(1s);
    EXPECT_EQ(lines_of(log.path()).size(), 0u) << "written before the hour was up";
    stop(fwd);
    EXPECT_EQ(lines_of(log.path()).size(), static_cast<std::size_t>(kConnections));
}

TEST(AccessLog, ChurnBurstLogsOrCountsEveryConnection) {
    EchoServer echo;
    LogPath log;
    RunningBinary fwd =
        start_binary("127.0.0.1:0", echo.endpoint(),
                     {"--shards", "2", "--access-log", log.path(), "--metrics", "127.0.0.1:0"});
    const auto port = metrics_port(*fwd.process, Deadline{5s});
    ASSERT_TRUE(port.has_value()) << fwd.process->stderr_text();

    // 2000 short connections from 4 threads, bounded by 60 s in all.
    constexpr int kThreads = 4;
    constexpr int kEach = 500;
    std::atomic<int> failures{0};
    const Deadline deadline{60s};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&] {
            for (int i = 0; i < kEach && !deadline.expired(); ++i) {
                try {
                    UniqueFd c = connect_to(fwd.endpoint);
                    std::array<std::byte, 8> buf{};
                    if (send_text(c.get(), "churn-me", deadline).status != IoStatus::Ok ||
                        recv_all(c.get(), buf, deadline).status != IoStatus::Ok)
                        ++failures;
                } catch (const std::exception&) {
                    ++failures;
                }
            }
        });
    for (std::thread& t : threads)
        t.join();
    ASSERT_EQ(failures.load(), 0);
    constexpr double kTotal = kThreads * kEach;

    std::map<std::string, double> s;
    ASSERT_TRUE(eventually(
        [&] {
            s = parse_samples(scrape_metrics(*port, Deadline{5s}));
            return sum_of(s, "uringfwd_route_connections_closed_total") == kTotal;
        },
        Deadline{10s}))
        << "closed: " << sum_of(s, "uringfwd_route_connections_closed_total");
    const double lines = sum_of(s, "uringfwd_access_log_lines_total");
    const double dropped = sum_of(s, "uringfwd_access_log_dropped_total");
    EXPECT_EQ(lines + dropped, kTotal);
    stop(*fwd.process);
    EXPECT_EQ(static_cast<double>(lines_of(log.path()).size()), lines);
    std::printf("churn: %g connections, %g lines, %g dropped\n", kTotal, lines, dropped);
}

} // namespace
} // namespace uringfwd::test
