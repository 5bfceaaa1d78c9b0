// The file at --upgrade-socket's path follows the rules of every socket file the
// binary binds (uringfwd/socket_file.hpp): only a socket nobody accepts on is
// replaced, anything else is the operator's and is refused by name, and at the end
// the process removes only the very socket its bind made. Before, the path was
// unlinked whatever it was, at the start and again at the exit: a regular file given
// by mistake was deleted by a start that went on to serve.
#include "tests/support/binary_process.hpp"
#include "tests/support/echo_server.hpp"
#include "tests/support/socket_files.hpp"
#include "tests/support/temp_dir.hpp"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
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

TEST(UpgradeSocketFile, ARegularFileAtThePathIsRefusedAndKept) {
    TempDir dir;
    EchoServer echo;
    const std::string path = dir.file("upgrade.sock");
    std::ofstream(path) << "the operator's notes\n";

    const std::string err = failed_start(args_with_upgrade_socket(echo, path));
    EXPECT_THAT(err, HasSubstr(fmt::format("cannot listen on upgrade socket {}: the path exists "
                                           "and is a regular file, not a socket; not replacing it",
                                           path)));
    EXPECT_EQ(contents(path), "the operator's notes\n");
}

TEST(UpgradeSocketFile, ADirectoryAtThePathIsRefusedAndKept) {
    TempDir dir;
    EchoServer echo;
    const std::string path = dir.file("upgrade.sock");
    ASSERT_EQ(::mkdir(path.c_str(), 0700), 0);

    const std::string err = failed_start(args_with_upgrade_socket(echo, path));
    EXPECT_THAT(err, HasSubstr("is a directory, not a socket"));
    EXPECT_TRUE(identify(path).directory);
}

TEST(UpgradeSocketFile, AStaleSocketIsReplacedAndItsOwnRemovedAtTheEnd) {
    TempDir dir;
    EchoServer echo;
    const std::string path = dir.file("upgrade.sock");
    ASSERT_TRUE(leave_stale_socket(path, SOCK_SEQPACKET));
    ASSERT_EQ(::chmod(path.c_str(), 0755), 0);

    BinaryProcess fwd{uring_fwd_binary(), args_with_upgrade_socket(echo, path)};
    ASSERT_TRUE(fwd.wait_listening(Deadline{10s})) << fwd.stderr_text();
    // A socket of its own, mode 0600 (the inode number may be the stale file's: the
    // filesystem may reuse it once the file is unlinked).
    const FileId bound = identify(path);
    EXPECT_TRUE(bound.socket);
    EXPECT_EQ(bound.permissions, 0600u);

    stop(fwd);
    EXPECT_FALSE(identify(path).exists) << "its own socket file is left at " << path;
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

    stop(fwd);
    EXPECT_EQ(contents(path), "not the process's\n");
}

} // namespace
} // namespace uringfwd::test
