// The file at --upgrade-socket's path follows the rules of every socket file the
// binary binds (uringfwd/socket_file.hpp): only a socket nobody accepts on is
// replaced, anything else is the operator's and is refused by name, and at the end
// the process removes only the very socket its bind made. Before, the path was
// unlinked whatever it was, at the start and again at the exit: a regular file given
// by mistake was deleted by a start that went on to serve.
#include "tests/support/binary_process.hpp"
#include "tests/support/echo_server.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/temp_dir.hpp"

#include <fmt/format.h>
#include <gmock/gmock.h>
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
#include <string>
#include <vector>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

std::vector<std::string> args_with_upgrade_socket(const EchoServer& echo, const std::string& path) {
    return {"--listen", "127.0.0.1:0", "--upstream",       echo.endpoint().to_string(),
            "--shards", "1",           "--upgrade-socket", path};
}

std::string first_line_of(const std::string& path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
}

std::optional<struct stat> stat_of(const std::string& path) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0)
        return std::nullopt;
    return st;
}

TEST(UpgradeSocketFile, ARegularFileAtThePathIsRefusedAndKept) {
    TempDir dir;
    EchoServer echo;
    const std::string path = dir.file("upgrade.sock");
    std::ofstream(path) << "the operator's notes\n";

    BinaryProcess refused{uring_fwd_binary(), args_with_upgrade_socket(echo, path)};
    const std::optional<ExitStatus> status = refused.wait_exit(Deadline{10s});
    ASSERT_TRUE(status) << "it started on the file's path; its stderr:\n" << refused.stderr_text();
    EXPECT_EQ(status->code, 1);
    EXPECT_THAT(refused.stderr_text(),
                HasSubstr(fmt::format("cannot listen on upgrade socket {}: the path exists and is "
                                      "a regular file, not a socket; not replacing it",
                                      path)));
    EXPECT_EQ(first_line_of(path), "the operator's notes");
}

TEST(UpgradeSocketFile, ADirectoryAtThePathIsRefusedAndKept) {
    TempDir dir;
    EchoServer echo;
    const std::string path = dir.file("upgrade.sock");
    ASSERT_EQ(::mkdir(path.c_str(), 0700), 0);

    BinaryProcess refused{uring_fwd_binary(), args_with_upgrade_socket(echo, path)};
    const std::optional<ExitStatus> status = refused.wait_exit(Deadline{10s});
    ASSERT_TRUE(status) << refused.stderr_text();
    EXPECT_EQ(status->code, 1);
    EXPECT_THAT(refused.stderr_text(), HasSubstr("is a directory, not a socket"));
    const std::optional<struct stat> after = stat_of(path);
    ASSERT_TRUE(after);
    EXPECT_TRUE(S_ISDIR(after->st_mode));
}

TEST(UpgradeSocketFile, AStaleSocketIsReplacedAndItsOwnRemovedAtTheEnd) {
    TempDir dir;
    EchoServer echo;
    const std::string path = dir.file("upgrade.sock");
    {
        // A socket file nobody accepts on: left by a process that was killed.
        UniqueFd bound(::socket(AF_UNIX, SOCK_SEQPACKET, 0));
        sockaddr_un address{};
        address.sun_family = AF_UNIX;
        std::memcpy(address.sun_path, path.c_str(), path.size());
        ASSERT_EQ(::bind(bound.get(), reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    }
    ASSERT_EQ(::chmod(path.c_str(), 0755), 0);

    BinaryProcess fwd{uring_fwd_binary(), args_with_upgrade_socket(echo, path)};
    ASSERT_TRUE(fwd.wait_listening(Deadline{10s})) << fwd.stderr_text();
    const std::optional<struct stat> bound = stat_of(path);
    ASSERT_TRUE(bound);
    EXPECT_TRUE(S_ISSOCK(bound->st_mode));
    // A socket of its own, mode 0600 (the inode number may be the stale file's: the
    // filesystem may reuse it once the file is unlinked).
    EXPECT_EQ(bound->st_mode & 0777, 0600u);

    fwd.signal(SIGTERM);
    const std::optional<ExitStatus> status = fwd.wait_exit(Deadline{10s});
    ASSERT_TRUE(status) << fwd.stderr_text();
    EXPECT_EQ(status->code, 0) << fwd.stderr_text();
    EXPECT_FALSE(stat_of(path)) << "its own socket file is left at " << path;
}

TEST(UpgradeSocketFile, AFilePutInItsPlaceMeanwhileIsLeftAtTheEnd) {
    TempDir dir;
    EchoServer echo;
    const std::string path = dir.file("upgrade.sock");
    BinaryProcess fwd{uring_fwd_binary(), args_with_upgrade_socket(echo, path)};
    ASSERT_TRUE(fwd.wait_listening(Deadline{10s})) << fwd.stderr_text();

    // The operator (or another tool) puts something else at the path while it runs.
    ASSERT_EQ(::unlink(path.c_str()), 0);
    std::ofstream(path) << "not the process's\n";

    fwd.signal(SIGTERM);
    const std::optional<ExitStatus> status = fwd.wait_exit(Deadline{10s});
    ASSERT_TRUE(status) << fwd.stderr_text();
    EXPECT_EQ(status->code, 0) << fwd.stderr_text();
    EXPECT_EQ(first_line_of(path), "not the process's");
}

} // namespace
} // namespace uringfwd::test
