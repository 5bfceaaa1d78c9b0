// Who may connect to a Unix listen path: the listen entry's mode, user and group are
// set on the socket file before the socket listens, and another user's process can
// connect exactly when they allow it (the service runs as a systemd DynamicUser, its
// clients as users of their own).
#include "tests/support/binary_process.hpp"
#include "tests/support/echo_server.hpp"
#include "tests/support/other_user.hpp"
#include "tests/support/temp_config_file.hpp"
#include "tests/support/temp_dir.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <thread>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

struct Stat {
    mode_t mode = 0;
    uid_t uid = 0;
    gid_t gid = 0;
};

std::optional<Stat> stat_of(const std::string& path) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode))
        return std::nullopt;
    return Stat{st.st_mode & 07777, st.st_uid, st.st_gid};
}

TEST(UnixAccess, ModeUserAndGroupDecideWhoMayConnect) {
    if (::geteuid() != 0)
        GTEST_SKIP() << "needs root to change a file's owner and to act as another user";
    if (::getpwnam("nobody") == nullptr || ::getgrnam("nogroup") == nullptr)
        GTEST_SKIP() << "no nobody/nogroup here";
    TempDir dir;
    dir.open_to_everyone();
    EchoServer echo;
    const ConfigFile file{fmt::format(
        "[[route]]\nname = \"u\"\nlisten = [\n"
        "  {{ address = \"unix:{0}/open.sock\", mode = \"0666\" }},\n"
        "  {{ address = \"unix:{0}/closed.sock\", mode = \"0600\" }},\n"
        "  {{ address = \"unix:{0}/group.sock\", mode = \"0660\", group = \"nogroup\" }},\n"
        "  {{ address = \"unix:{0}/user.sock\", mode = \"0600\", user = \"nobody\" }},\n"
        "]\n  [[route.upstream]]\n  address = \"{1}\"\n",
        dir.path(), echo.endpoint().to_string())};
    BinaryProcess fwd{uring_fwd_binary(), {"--config", file.path(), "--shards", "2"}};
    ASSERT_TRUE(fwd.wait_listening(Deadline{10s})) << fwd.stderr_text();

    const std::optional<Stat> open = stat_of(dir.file("open.sock"));
    const std::optional<Stat> closed = stat_of(dir.file("closed.sock"));
    const std::optional<Stat> group = stat_of(dir.file("group.sock"));
    const std::optional<Stat> user = stat_of(dir.file("user.sock"));
    ASSERT_TRUE(open && closed && group && user) << fwd.stderr_text();
    EXPECT_EQ(open->mode, 0666u);
    EXPECT_EQ(closed->mode, 0600u);
    EXPECT_EQ(group->mode, 0660u);
    EXPECT_EQ(group->gid, kOtherGid);
    EXPECT_EQ(group->uid, 0u);
    EXPECT_EQ(user->mode, 0600u);
    EXPECT_EQ(user->uid, kOtherUid);

    EXPECT_EQ(connect_as_other_user(dir.file("open.sock")), 0);
    EXPECT_EQ(connect_as_other_user(dir.file("closed.sock")), EACCES);
    EXPECT_EQ(connect_as_other_user(dir.file("group.sock")), 0);
    EXPECT_EQ(connect_as_other_user(dir.file("user.sock")), 0);
}

// Without a mode the file is what bind(2) makes of the umask: not writable by others,
// so another user cannot connect (the "Permission denied").
TEST(UnixAccess, WithoutAModeOtherUsersCannotConnect) {
    if (::geteuid() != 0)
        GTEST_SKIP() << "needs root to act as another user";
    TempDir dir;
    dir.open_to_everyone();
    EchoServer echo;
    BinaryProcess fwd{
        uring_fwd_binary(),
        {"--listen", "unix:" + dir.file("plain.sock"), "--upstream", echo.endpoint().to_string()}};
    ASSERT_TRUE(fwd.wait_listening(Deadline{10s})) << fwd.stderr_text();
    const std::optional<Stat> plain = stat_of(dir.file("plain.sock"));
    ASSERT_TRUE(plain);
    if ((plain->mode & 0002) != 0)
        GTEST_SKIP() << "this umask lets everyone write the socket";
    EXPECT_EQ(connect_as_other_user(dir.file("plain.sock")), EACCES);
}

TEST(UnixAccess, AnUnknownUserStopsTheStart) {
    TempDir dir;
    EchoServer echo;
    const ConfigFile file{
        fmt::format("[[route]]\nname = \"u\"\nlisten = {{ address = \"unix:{}\", user = "
                    "\"no-such-user-here\" }}\n  [[route.upstream]]\n  address = \"{}\"\n",
                    dir.file("u.sock"), echo.endpoint().to_string())};
    BinaryProcess fwd{uring_fwd_binary(), {"--config", file.path()}};
    const std::optional<ExitStatus> status = fwd.wait_exit(Deadline{10s});
    ASSERT_TRUE(status) << fwd.stderr_text();
    EXPECT_EQ(status->code, 1);
    std::this_thread::sleep_for(50ms);
    EXPECT_NE(fwd.stderr_text().find("no user named \"no-such-user-here\""), std::string::npos)
        << fwd.stderr_text();
    EXPECT_FALSE(stat_of(dir.file("u.sock")));
}

} // namespace
} // namespace uringfwd::test
