// The control server's limits (engine/cli/control/control_server.hpp) in-process, with a
// runner of our own and limits small enough to see: an idle client is closed after the
// idle timeout; beyond max_clients a newcomer takes the place of the client idle
// longest, or is refused with one line while every client is mid-command; the socket
// file goes with the server unless a successor has it.
#include "cli/control/control_server.hpp"

#include "tests/support/control_client.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/temp_dir.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <chrono>
#include <stdexcept>
#include <string>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;
using cli::control::Command;
using cli::control::ControlServer;
using cli::control::ControlSocket;
using cli::control::Reply;
using cli::control::ServerLimits;
using cli::control::Verb;

Reply answer(const Command& c) {
    if (c.verb == Verb::ShowStats)
        throw std::runtime_error("the runner failed");
    return Reply{false, c.verb == Verb::Help ? "helped\n" : "done\n"};
}

bool exists(const std::string& path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0;
}

std::string until_eof(int fd) {
    std::string got;
    recv_until_eof(fd, Deadline{5s}, [&](std::span<const std::byte> chunk) {
        got.append(reinterpret_cast<const char*>(chunk.data()), chunk.size());
    });
    return got;
}

TEST(ControlServer, AnswersAndTurnsARunnerFailureIntoAnError) {
    TempDir dir;
    ControlServer server{ControlSocket::bind(dir.file("c.sock"), 0600, std::nullopt), answer};
    EXPECT_EQ(control_command(dir.file("c.sock"), "help"), "helped\n");
    EXPECT_EQ(control_command(dir.file("c.sock"), "show stats"), "error: the runner failed\n");
    EXPECT_EQ(control_command(dir.file("c.sock"), "nonsense"),
              "error: unknown command \"nonsense\" (try help)\n");
}

TEST(ControlServer, AnIdleClientIsClosed) {
    TempDir dir;
    ControlServer server{ControlSocket::bind(dir.file("c.sock"), 0600, std::nullopt), answer,
                         ServerLimits{4, 300ms}};
    const UniqueFd fd = connect_unix(dir.file("c.sock"));
    ASSERT_TRUE(fd);
    ASSERT_EQ(request(fd.get(), "help", Deadline{5s}), "helped\n");
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(until_eof(fd.get()), "");
    const auto waited = std::chrono::steady_clock::now() - start;
    EXPECT_GE(waited, 250ms);
    EXPECT_LE(waited, 3s);
}

TEST(ControlServer, ANewcomerTakesTheIdlestPlaceOrIsRefusedWhenAllAreBusy) {
    TempDir dir;
    ControlServer server{ControlSocket::bind(dir.file("c.sock"), 0600, std::nullopt), answer,
                         ServerLimits{2, 30s}};
    // Two clients mid-command (a line begun, no newline yet): neither may be closed.
    const UniqueFd busy1 = connect_unix(dir.file("c.sock"));
    const UniqueFd busy2 = connect_unix(dir.file("c.sock"));
    ASSERT_EQ(send_text(busy1.get(), "sho", Deadline{5s}).status, IoStatus::Ok);
    ASSERT_EQ(send_text(busy2.get(), "he", Deadline{5s}).status, IoStatus::Ok);
    std::this_thread::sleep_for(100ms); // both read by the server
    const UniqueFd refused = connect_unix(dir.file("c.sock"));
    ASSERT_TRUE(refused);
    EXPECT_EQ(until_eof(refused.get()),
              "error: too many control clients busy (at most 2); try again later\n\n");
    // The first finishes its command and is idle: the next newcomer takes its place.
    ASSERT_EQ(request(busy1.get(), "w stats x", Deadline{5s}).value_or("").substr(0, 6), "error:");
    const UniqueFd newcomer = connect_unix(dir.file("c.sock"));
    ASSERT_TRUE(newcomer);
    EXPECT_EQ(request(newcomer.get(), "help", Deadline{5s}), "helped\n");
    EXPECT_EQ(until_eof(busy1.get()),
              "error: closed: idle, and a new client needed the room (at most 2 clients)\n\n");
    // The other busy one finishes as if nothing happened.
    EXPECT_EQ(request(busy2.get(), "lp", Deadline{5s}), "helped\n");
}

TEST(ControlServer, TheFileGoesWithTheServerUnlessHandedOver) {
    TempDir dir;
    {
        ControlServer server{ControlSocket::bind(dir.file("a.sock"), 0600, std::nullopt), answer};
        EXPECT_TRUE(exists(dir.file("a.sock")));
    }
    EXPECT_FALSE(exists(dir.file("a.sock")));
    {
        ControlServer server{ControlSocket::bind(dir.file("b.sock"), 0600, std::nullopt), answer};
        server.hand_over();
    }
    EXPECT_TRUE(exists(dir.file("b.sock")));
}

} // namespace
} // namespace uringfwd::test
