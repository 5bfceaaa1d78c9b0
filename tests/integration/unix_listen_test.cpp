// Unix listen paths: the binary replaces only a socket file nobody accepts on, never
// another kind of file or a live socket, and removes at exit only the file its own bind
// made, if the path still names it. A failed start leaves every path it did not create
// as it found it.
#include "tests/support/binary_process.hpp"
#include "tests/support/echo_server.hpp"
#include "tests/support/exchange.hpp"
#include "tests/support/payload.hpp"
#include "tests/support/proc_stats.hpp"
#include "tests/support/socket_files.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/temp_config_file.hpp"
#include "tests/support/temp_dir.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

bool echoes(const Endpoint& at) {
    UniqueFd fd = connect_to(at, 5000ms);
    const ExchangeResult r = exchange(fd, source_plan(4096, 7), Deadline{5s});
    return r.received == 4096 && r.received_sha256 == payload_sha256(7, 4096);
}

// The issue's first bug: a second instance on the path of a running one said "Address
// already in use", exited 1 and removed the running instance's socket file.
TEST(UnixListen, ASecondInstanceLeavesTheRunningOnesSocket) {
    TempDir dir;
    EchoServer echo;
    const std::string path = dir.file("u1.sock");
    const Endpoint at = Endpoint::parse("unix:" + path);
    BinaryProcess first{uring_fwd_binary(),
                        {"--listen", at.to_string(), "--upstream", echo.endpoint().to_string()}};
    ASSERT_TRUE(first.wait_listening(Deadline{10s})) << first.stderr_text();
    const FileId before = identify(path);
    ASSERT_TRUE(before.socket);

    const std::string err =
        failed_start({"--listen", at.to_string(), "--upstream", echo.endpoint().to_string()});
    EXPECT_NE(err.find("cannot listen on " + at.to_string() + ": it is in use by another process"),
              std::string::npos)
        << err;
    EXPECT_EQ(identify(path), before) << "the running instance's socket file was touched";
    EXPECT_TRUE(echoes(at));
    stop(first);
    EXPECT_FALSE(identify(path).exists) << "the file the first instance made stays after it";
}

// Another program's live socket is left alone the same way.
TEST(UnixListen, AnotherProgramsLiveSocketIsInUse) {
    TempDir dir;
    EchoServer echo;
    const Listener theirs = listen_on(Endpoint::parse("unix:" + dir.file("theirs.sock")));
    const FileId before = identify(dir.file("theirs.sock"));
    const std::string err = failed_start(
        {"--listen", theirs.endpoint().to_string(), "--upstream", echo.endpoint().to_string()});
    EXPECT_NE(err.find("in use by another process"), std::string::npos) << err;
    EXPECT_EQ(identify(dir.file("theirs.sock")), before);
    UniqueFd still;
    EXPECT_EQ(try_connect(theirs.endpoint(), 2000ms, still), 0);
}

// The second bug: a regular file at the path was replaced by a socket (a
// connect to it is refused, which passed for a stale socket) and removed at exit.
TEST(UnixListen, ARegularFileIsNeverReplaced) {
    TempDir dir;
    EchoServer echo;
    const std::string path = dir.file("precious.txt");
    std::ofstream(path) << "data\n";
    const std::string err =
        failed_start({"--listen", "unix:" + path, "--upstream", echo.endpoint().to_string()});
    EXPECT_NE(err.find("cannot listen on unix:" + path +
                       ": the path exists and is a regular file, not a socket; not replacing it"),
              std::string::npos)
        << err;
    EXPECT_EQ(contents(path), "data\n");
}

TEST(UnixListen, ADirectoryIsNeverReplaced) {
    TempDir dir;
    EchoServer echo;
    const std::string path = dir.file("sub");
    ASSERT_EQ(::mkdir(path.c_str(), 0755), 0);
    const std::string err =
        failed_start({"--listen", "unix:" + path, "--upstream", echo.endpoint().to_string()});
    EXPECT_NE(err.find("is a directory, not a socket"), std::string::npos) << err;
    EXPECT_TRUE(identify(path).exists);
}

// A socket file nobody accepts on (its process ended) is what may be replaced.
TEST(UnixListen, AStaleSocketFileIsReplaced) {
    TempDir dir;
    EchoServer echo;
    const std::string path = dir.file("stale.sock");
    // Bound and closed without ever listening: the file stays, refusing connects.
    ASSERT_TRUE(leave_stale_socket(path, SOCK_STREAM));
    ASSERT_TRUE(identify(path).socket);
    const Endpoint at = Endpoint::parse("unix:" + path);
    BinaryProcess fwd{uring_fwd_binary(),
                      {"--listen", at.to_string(), "--upstream", echo.endpoint().to_string()}};
    ASSERT_TRUE(fwd.wait_listening(Deadline{10s})) << fwd.stderr_text();
    EXPECT_TRUE(echoes(at));
    stop(fwd);
    EXPECT_FALSE(identify(path).exists);
}

// At exit only the socket the bind made is removed: a file put at the path meanwhile
// (an operator's, another instance's) stays.
TEST(UnixListen, AFileThatReplacedOursIsNotRemovedAtExit) {
    TempDir dir;
    EchoServer echo;
    const std::string path = dir.file("moved.sock");
    BinaryProcess fwd{uring_fwd_binary(),
                      {"--listen", "unix:" + path, "--upstream", echo.endpoint().to_string()}};
    ASSERT_TRUE(fwd.wait_listening(Deadline{10s})) << fwd.stderr_text();
    ASSERT_EQ(::unlink(path.c_str()), 0);
    std::ofstream(path) << "someone else's\n";
    stop(fwd);
    EXPECT_EQ(contents(path), "someone else's\n");
}

// A start that fails on its second listen address removes the file it made for the
// first, and leaves the file that stopped it.
TEST(UnixListen, AFailedStartRemovesOnlyWhatItMade) {
    TempDir dir;
    EchoServer echo;
    const std::string made = dir.file("a.sock");
    const std::string precious = dir.file("precious.txt");
    std::ofstream(precious) << "data\n";
    const ConfigFile file{fmt::format("[[route]]\nname = \"u\"\nlisten = [\"unix:{}\", "
                                      "\"unix:{}\"]\n  [[route.upstream]]\n  address = \"{}\"\n",
                                      made, precious, echo.endpoint().to_string())};
    const std::string err = failed_start({"--config", file.path()});
    EXPECT_NE(err.find("not a socket; not replacing it"), std::string::npos) << err;
    EXPECT_FALSE(identify(made).exists) << "the socket file of the failed start stays";
    EXPECT_EQ(contents(precious), "data\n");
}

// A binary upgrade hands the socket itself over: the old process leaves its file to the
// successor, which serves it; a file that came with an inherited socket is never
// removed (it was not this process's bind).
TEST(UnixListen, AnUpgradeLeavesTheFileToTheSuccessor) {
    TempDir dir;
    EchoServer echo;
    const std::string path = dir.file("up.sock");
    const Endpoint at = Endpoint::parse("unix:" + path);
    const ConfigFile file{fmt::format("[engine]\nupgrade_socket = \"{}\"\n[[route]]\nname = "
                                      "\"u\"\nlisten = \"{}\"\n  [[route.upstream]]\n  "
                                      "address = \"{}\"\n",
                                      dir.file("upgrade.sock"), at.to_string(),
                                      echo.endpoint().to_string())};
    BinaryProcess old_process{uring_fwd_binary(), {"--config", file.path()}};
    ASSERT_TRUE(old_process.wait_listening(Deadline{10s})) << old_process.stderr_text();
    const FileId before = identify(path);
    BinaryProcess successor{uring_fwd_binary(), {"--config", file.path()}};
    ASSERT_TRUE(eventually(
        [&] {
            return successor.stderr_text().find("stopped accepting and drains") !=
                   std::string::npos;
        },
        Deadline{10s}))
        << successor.stderr_text();
    ASSERT_TRUE(old_process.wait_exit(Deadline{10s})) << old_process.stderr_text();
    EXPECT_EQ(identify(path), before);
    EXPECT_TRUE(echoes(at));
    stop(successor);
    EXPECT_EQ(identify(path), before);
}

} // namespace
} // namespace uringfwd::test
