// The member and connection commands of the control socket (README "Runtime
// control") through `uring-fwd ctl` against the real binary: draining a member
// under a connect loop (no new connection reaches it after the reply, its held
// connection still echoes, `ready` brings it back), `show members`, `show
// connections` listing a held connection with its exact bytes, and `close
// connection` resetting both ends.
#include "tests/support/binary_process.hpp"
#include "tests/support/control_client.hpp"
#include "tests/support/echo_server.hpp"
#include "tests/support/eventually.hpp"
#include "tests/support/named_server.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/temp_dir.hpp"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// key=value pairs of one line.
std::map<std::string, std::string> fields(const std::string& line) {
    std::map<std::string, std::string> out;
    std::istringstream in(line);
    std::string word;
    while (in >> word) {
        const std::size_t eq = word.find('=');
        if (eq != std::string::npos)
            out[word.substr(0, eq)] = word.substr(eq + 1);
    }
    return out;
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line))
        if (!line.empty())
            out.push_back(line);
    return out;
}

std::string ctl_ok(const std::string& control, std::vector<std::string> words) {
    words.insert(words.begin(), {"--control", control});
    const CtlRun run = run_ctl(words);
    EXPECT_EQ(run.status.code, 0) << run.err;
    return run.out;
}

// The one row `show connections` lists, as its fields; empty unless there is exactly one.
std::map<std::string, std::string> only_connection(const std::string& control) {
    const std::vector<std::string> rows = lines_of(ctl_ok(control, {"show", "connections"}));
    return rows.size() == 1 ? fields(rows[0]) : std::map<std::string, std::string>{};
}

TEST(ControlMembers, DrainStopsNewConnectionsAndReadyBringsThemBack) {
    TempDir dir;
    NamedServer a('a');
    NamedServer b('b');
    const std::string control = dir.file("control.sock");
    BinaryProcess fwd{uring_fwd_binary(),
                      {"--listen", "127.0.0.1:0", "--upstream", a.endpoint().to_string(),
                       "--upstream", b.endpoint().to_string(), "--shards", "2", "--control",
                       control}};
    const std::optional<Endpoint> at = fwd.wait_listening(Deadline{10s});
    ASSERT_TRUE(at) << fwd.stderr_text();

    // A connection held on b before the drain.
    UniqueFd held;
    for (int i = 0; i < 10 && !held; ++i) {
        UniqueFd fd;
        if (name_through(*at, Deadline{5s}, {}, &fd) == 'b')
            held = std::move(fd);
    }
    ASSERT_TRUE(held);

    // A client loop runs through the change: every one of its connections is served.
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> served{0};
    std::atomic<uint64_t> failed{0};
    std::thread loop([&] {
        const Deadline cap{20s};
        for (int i = 0; i < 100000 && !stop.load() && !cap.expired(); ++i)
            ++(name_through(*at, Deadline{5s}).has_value() ? served : failed);
    });
    EXPECT_TRUE(eventually([&] { return served.load() >= 20; }, Deadline{5s}));
    EXPECT_THAT(
        ctl_ok(control, {"set", "member", "default", b.endpoint().to_string(), "state", "drain"}),
        HasSubstr("state drain"));
    // After the reply no new connection reaches b: what the loop sends from now on goes
    // to a (a connection whose member was chosen before the reply may still land on b:
    // one round trip of the loop is let by first).
    const uint64_t served_at_reply = served.load();
    EXPECT_TRUE(eventually([&] { return served.load() >= served_at_reply + 2; }, Deadline{5s}));
    const uint64_t b_after_reply = b.accepted();
    EXPECT_TRUE(eventually([&] { return served.load() >= served_at_reply + 100; }, Deadline{10s}));
    EXPECT_EQ(b.accepted(), b_after_reply);
    stop.store(true);
    loop.join();
    EXPECT_EQ(failed.load(), 0u);
    const std::string members = ctl_ok(control, {"show", "members", "default"});
    const std::vector<std::string> rows = lines_of(members);
    ASSERT_EQ(rows.size(), 2u) << members;
    EXPECT_EQ(fields(rows[1])["state"], "drain") << rows[1];
    EXPECT_EQ(fields(rows[1])["source"], "runtime") << rows[1];
    EXPECT_EQ(fields(rows[1])["open"], "1") << rows[1];
    EXPECT_EQ(fields(rows[0])["state"], "ready") << rows[0];

    const uint64_t b_before = b.accepted();
    for (int i = 0; i < 200; ++i)
        ASSERT_EQ(name_through(*at, Deadline{5s}), 'a') << i;
    EXPECT_EQ(b.accepted(), b_before);
    // The held connection still echoes.
    ASSERT_EQ(send_text(held.get(), "still", Deadline{5s}).status, IoStatus::Ok);
    char echo[5];
    ASSERT_EQ(recv_all(held.get(), std::as_writable_bytes(std::span(echo)), Deadline{5s}).status,
              IoStatus::Ok);
    EXPECT_EQ(std::string(echo, 5), "still");

    ctl_ok(control, {"set", "member", "default", b.endpoint().to_string(), "state", "ready"});
    int reached_b = 0;
    for (int i = 0; i < 50; ++i)
        reached_b += name_through(*at, Deadline{5s}) == 'b' ? 1 : 0;
    EXPECT_GT(reached_b, 0);

    const CtlRun unknown =
        run_ctl({"--control", control, "set", "member", "default", "10.9.9.9:1", "state", "drain"});
    EXPECT_EQ(unknown.status.code, 1);
    EXPECT_THAT(unknown.err, StartsWith("error: "));
}

TEST(ControlMembers, AddWeightDelAndCloseConnections) {
    TempDir dir;
    NamedServer a('a');
    NamedServer b('b');
    const std::string control = dir.file("control.sock");
    RunningBinary fwd =
        start_binary("127.0.0.1:0", a.endpoint(), {"--shards", "2", "--control", control});
    const std::string b_address = b.endpoint().to_string();

    EXPECT_THAT(ctl_ok(control, {"add", "member", "default", b_address, "weight", "3"}),
                HasSubstr("added (weight 3)"));
    std::vector<std::string> rows = lines_of(ctl_ok(control, {"show", "members"}));
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(fields(rows[1])["member"], b_address);
    EXPECT_EQ(fields(rows[1])["weight"], "3");
    int reached_b = 0;
    for (int i = 0; i < 40; ++i)
        reached_b += name_through(fwd.endpoint, Deadline{5s}) == 'b' ? 1 : 0;
    EXPECT_GT(reached_b, 0);

    EXPECT_THAT(ctl_ok(control, {"set", "member", "default", b_address, "weight", "7"}),
                HasSubstr("weight 7"));
    EXPECT_THAT(ctl_ok(control, {"show", "members", "default", "json"}),
                HasSubstr("\"weight\":7,"));

    // Two held connections, closed together.
    std::vector<UniqueFd> held;
    for (int i = 0; i < 2; ++i) {
        held.emplace_back();
        ASSERT_TRUE(name_through(fwd.endpoint, Deadline{5s}, {}, &held.back()).has_value());
    }
    EXPECT_EQ(ctl_ok(control, {"close", "connections", "default"}), "closed 2 connections\n");

    EXPECT_THAT(ctl_ok(control, {"del", "member", "default", b_address}), HasSubstr("removed"));
    rows = lines_of(ctl_ok(control, {"show", "members"}));
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_EQ(fields(rows[0])["member"], a.endpoint().to_string());
    for (int i = 0; i < 20; ++i)
        EXPECT_EQ(name_through(fwd.endpoint, Deadline{5s}), 'a');

    const CtlRun last =
        run_ctl({"--control", control, "del", "member", "default", a.endpoint().to_string()});
    EXPECT_EQ(last.status.code, 1);
    const CtlRun no_route = run_ctl({"--control", control, "show", "members", "nope"});
    EXPECT_EQ(no_route.status.code, 1);
    EXPECT_THAT(no_route.err, HasSubstr("no route named \"nope\""));
}

TEST(ControlMembers, ShowConnectionsListsExactBytesAndCloseResetsBothEnds) {
    TempDir dir;
    EchoServer echo;
    const std::string control = dir.file("control.sock");
    RunningBinary fwd =
        start_binary("127.0.0.1:0", echo.endpoint(), {"--shards", "2", "--control", control});
    UniqueFd held = connect_to(fwd.endpoint);
    const std::string sent(1234, 'q');
    ASSERT_EQ(send_text(held.get(), sent, Deadline{5s}).status, IoStatus::Ok);
    std::string back(1234, '\0');
    ASSERT_EQ(recv_all(held.get(), std::as_writable_bytes(std::span(back)), Deadline{5s}).status,
              IoStatus::Ok);

    std::map<std::string, std::string> row;
    ASSERT_TRUE(eventually(
        [&] {
            row = only_connection(control);
            return row["bytes_to_upstream"] == "1234" && row["bytes_to_client"] == "1234";
        },
        Deadline{5s}))
        << ctl_ok(control, {"show", "connections"});
    EXPECT_EQ(row["route"], "default");
    EXPECT_EQ(row["upstream"], echo.endpoint().to_string());
    EXPECT_EQ(row["phase"], "forwarding");
    EXPECT_THAT(ctl_ok(control, {"show", "connections", "json"}),
                HasSubstr("\"bytes_to_upstream\":1234,\"bytes_to_client\":1234"));

    EXPECT_THAT(ctl_ok(control, {"close", "connection", row["id"]}), HasSubstr("closed"));
    // Our end sees a reset (SO_LINGER 0), and so does the upstream: its side
    // closes.
    char byte = 0;
    pollfd p{held.get(), POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 5000), 1);
    EXPECT_EQ(::recv(held.get(), &byte, 1, 0), -1);
    EXPECT_EQ(errno, ECONNRESET);
    EXPECT_TRUE(eventually([&] { return echo.open_connections() == 0; }, Deadline{5s}));
    EXPECT_TRUE(eventually(
        [&] {
            const std::string stats = ctl_ok(control, {"show", "stats"});
            return stats.find("closed_admin 1\n") != std::string::npos;
        },
        Deadline{5s}));
    const CtlRun again = run_ctl({"--control", control, "close", "connection", row["id"]});
    EXPECT_EQ(again.status.code, 1);
}

// `move connection` and `rebalance` through `uring-fwd ctl` on two shards: the
// connection is listed on the other shard with the same id and bytes, still echoes, and
// the counters say it moved; a move to a shard that does not exist is an error.
TEST(ControlMembers, MoveConnectionAndRebalanceMoveWithoutALostByte) {
    TempDir dir;
    EchoServer echo;
    const std::string control = dir.file("control.sock");
    RunningBinary fwd =
        start_binary("127.0.0.1:0", echo.endpoint(), {"--shards", "2", "--control", control});
    auto echo_round = [](int fd, std::size_t n, char fill) {
        const std::string sent(n, fill);
        std::string back(n, '\0');
        return send_text(fd, sent, Deadline{5s}).status == IoStatus::Ok &&
               recv_all(fd, std::as_writable_bytes(std::span(back)), Deadline{5s}).status ==
                   IoStatus::Ok &&
               back == sent;
    };
    UniqueFd held = connect_to(fwd.endpoint);
    ASSERT_TRUE(echo_round(held.get(), 500, 'm'));
    std::map<std::string, std::string> row;
    ASSERT_TRUE(eventually(
        [&] {
            row = only_connection(control);
            return row["bytes_to_client"] == "500";
        },
        Deadline{5s}));
    const std::string to = row["shard"] == "0" ? "1" : "0";
    EXPECT_EQ(ctl_ok(control, {"move", "connection", row["id"], to}),
              fmt::format("connection {} moving to shard {}\n", row["id"], to));
    std::map<std::string, std::string> moved;
    EXPECT_TRUE(eventually(
        [&] {
            moved = only_connection(control);
            return moved["shard"] == to;
        },
        Deadline{5s}))
        << ctl_ok(control, {"show", "connections"});
    EXPECT_EQ(moved["id"], row["id"]);
    EXPECT_EQ(moved["bytes_to_upstream"], "500");
    ASSERT_TRUE(echo_round(held.get(), 700, 'n')); // served from its new shard
    const std::string stats = ctl_ok(control, {"show", "stats"});
    EXPECT_THAT(stats, HasSubstr("moved_in 1\n"));
    EXPECT_THAT(stats, HasSubstr("moved_out 1\n"));

    const CtlRun nowhere = run_ctl({"--control", control, "move", "connection", row["id"], "7"});
    EXPECT_EQ(nowhere.status.code, 1);
    EXPECT_THAT(nowhere.out + nowhere.err, HasSubstr("no shard 7: the engine has 2 (0 to 1)"));
    // A second connection on the same shard as the first: rebalance moves one of them.
    UniqueFd second = connect_to(fwd.endpoint);
    ASSERT_TRUE(echo_round(second.get(), 10, 's'));
    std::vector<std::string> rows;
    ASSERT_TRUE(eventually(
        [&] {
            rows = lines_of(ctl_ok(control, {"show", "connections"}));
            return rows.size() == 2;
        },
        Deadline{5s}));
    for (const std::string& line : rows) {
        std::map<std::string, std::string> r = fields(line);
        if (r["shard"] != to)
            ctl_ok(control, {"move", "connection", r["id"], to});
    }
    auto shards_listed = [&] {
        std::vector<std::string> shards;
        for (const std::string& line : lines_of(ctl_ok(control, {"show", "connections"})))
            shards.push_back(fields(line)["shard"]);
        std::sort(shards.begin(), shards.end());
        return shards;
    };
    ASSERT_TRUE(eventually(
        [&] {
            return shards_listed() == std::vector<std::string>{to, to};
        },
        Deadline{5s}));
    EXPECT_EQ(ctl_ok(control, {"rebalance"}), "moving 1 connection between shards\n");
    EXPECT_TRUE(eventually(
        [&] {
            return shards_listed() == std::vector<std::string>{"0", "1"};
        },
        Deadline{5s}));
    EXPECT_EQ(ctl_ok(control, {"rebalance"}), "moving 0 connections between shards\n");
    EXPECT_TRUE(echo_round(held.get(), 100, 'o'));
    EXPECT_TRUE(echo_round(second.get(), 100, 'p'));
}

} // namespace
} // namespace uringfwd::test
