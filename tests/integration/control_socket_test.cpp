// The binary's control socket (--control, `uring-fwd ctl`; README "Runtime control"),
// over real sockets: who may connect (mode 0600 unless widened), every command's reply,
// ctl's exit statuses, the socket file's life (made, removed on exit, a live one at the
// path refused and left, a stale one replaced, kept across a binary upgrade), and that
// nothing a client sends (garbage, an endless line, a crowd of idle clients) stops the
// engine forwarding or the socket answering.
#include "tests/support/binary_process.hpp"
#include "tests/support/control_client.hpp"
#include "tests/support/echo_server.hpp"
#include "tests/support/eventually.hpp"
#include "tests/support/exchange.hpp"
#include "tests/support/other_user.hpp"
#include "tests/support/payload.hpp"
#include "tests/support/socket_files.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/temp_config_file.hpp"
#include "tests/support/temp_dir.hpp"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::StartsWith;

struct Forwarder {
    std::unique_ptr<BinaryProcess> process;
    Endpoint endpoint;
    std::string control;
};

// The binary forwarding to `echo` with its control socket in `dir`.
Forwarder start_with_control(const TempDir& dir, const EchoServer& echo,
                             std::vector<std::string> extra = {}) {
    const std::string path = dir.file("control.sock");
    extra.insert(extra.end(), {"--control", path, "--shards", "2"});
    RunningBinary fwd = start_binary("127.0.0.1:0", echo.endpoint(), extra);
    return Forwarder{std::move(fwd.process), fwd.endpoint, path};
}

// One echo exchange through the forwarder: it still forwards.
bool forwards(const Endpoint& at) {
    UniqueFd fd = connect_to(at);
    const ExchangeResult r = exchange(fd, source_plan(1000, 7), Deadline{5s});
    return r.received == 1000 && r.received_sha256 == payload_sha256(7, 1000);
}

// `name value` lines as a map.
std::map<std::string, std::string> pairs(const std::string& reply) {
    std::map<std::string, std::string> out;
    std::istringstream in(reply);
    std::string line;
    while (std::getline(in, line)) {
        const std::size_t space = line.find(' ');
        if (space != std::string::npos)
            out[line.substr(0, space)] = line.substr(space + 1);
    }
    return out;
}

TEST(ControlSocket, OwnerOnlyByDefaultAndAnotherUserCannotConnect) {
    TempDir dir;
    dir.open_to_everyone();
    EchoServer echo;
    Forwarder fwd = start_with_control(dir, echo);
    EXPECT_EQ(identify(fwd.control).permissions, 0600u);
    EXPECT_THAT(control_command(fwd.control, "help"), HasSubstr("show info"));
    if (::geteuid() != 0)
        GTEST_SKIP() << "needs root to act as another user";
    EXPECT_EQ(connect_as_other_user(fwd.control, "help\n", "help"), EACCES);
}

TEST(ControlSocket, ControlModeAndGroupLetTheGroupIn) {
    if (::geteuid() != 0)
        GTEST_SKIP() << "needs root to change a file's group and to act as another user";
    if (::getgrnam("nogroup") == nullptr)
        GTEST_SKIP() << "no nogroup here";
    TempDir dir;
    dir.open_to_everyone();
    EchoServer echo;
    const ConfigFile file{fmt::format(
        "[engine]\ncontrol = \"{}\"\ncontrol_mode = \"0660\"\ncontrol_group = \"nogroup\"\n"
        "[[route]]\nname = \"web\"\nlisten = \"127.0.0.1:0\"\n  [[route.upstream]]\n"
        "  address = \"{}\"\n",
        dir.file("control.sock"), echo.endpoint().to_string())};
    BinaryProcess fwd{uring_fwd_binary(), {"--config", file.path(), "--shards", "1"}};
    ASSERT_TRUE(fwd.wait_listening(Deadline{10s})) << fwd.stderr_text();
    struct stat st {};
    ASSERT_EQ(::lstat(dir.file("control.sock").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0660u);
    EXPECT_EQ(st.st_gid, kOtherGid);
    // The reply of help starts with its first line, "help  this list".
    EXPECT_EQ(connect_as_other_user(dir.file("control.sock"), "help\n", "help"), 0);
    // And ctl finds the path in the same file.
    const CtlRun run = run_ctl({"--config", file.path(), "show", "routes"});
    EXPECT_EQ(run.status.code, 0) << run.err;
    EXPECT_THAT(run.out, HasSubstr("route=web listen=127.0.0.1:"));
}

TEST(ControlSocket, AnUnknownGroupStopsTheStart) {
    TempDir dir;
    EchoServer echo;
    const ConfigFile file{
        fmt::format("[engine]\ncontrol = \"{}\"\ncontrol_group = \"no-such-group-here\"\n"
                    "[[route]]\nname = \"web\"\nlisten = \"127.0.0.1:0\"\n  [[route.upstream]]\n"
                    "  address = \"{}\"\n",
                    dir.file("control.sock"), echo.endpoint().to_string())};
    EXPECT_THAT(failed_start({"--config", file.path(), "--shards", "1"}),
                HasSubstr("control_group: no group named \"no-such-group-here\""));
    EXPECT_FALSE(identify(dir.file("control.sock")).exists);
}

TEST(ControlSocket, EveryCommandReplies) {
    TempDir dir;
    EchoServer echo;
    Forwarder fwd = start_with_control(dir, echo);
    ASSERT_TRUE(forwards(fwd.endpoint));

    const std::string help = control_command(fwd.control, "help");
    for (const char* c : {"help", "show info", "show stats", "show routes"})
        EXPECT_THAT(help, HasSubstr(c));
    EXPECT_THAT(help, HasSubstr("replies as JSON"));

    // forwards() has closed its client; the engine counts the close a moment later.
    ASSERT_TRUE(eventually(
        [&] {
            return pairs(control_command(fwd.control, "show info")).at("connections_open") == "0";
        },
        Deadline{5s}));
    const auto info = pairs(control_command(fwd.control, "show info"));
    EXPECT_EQ(info.at("pid"), std::to_string(fwd.process->pid()));
    EXPECT_EQ(info.at("shards"), "2");
    EXPECT_EQ(info.at("routes"), "1");
    EXPECT_EQ(info.at("connections_open"), "0");
    EXPECT_EQ(info.at("config_file"), "-");
    EXPECT_FALSE(info.at("version").empty());
    EXPECT_FALSE(info.at("data_path").empty());
    EXPECT_THAT(info.at("started"), ::testing::MatchesRegex("20[0-9-]+T[0-9:]+Z"));
    EXPECT_LE(std::stoul(info.at("uptime_seconds")), 60u);

    const auto stats = pairs(control_command(fwd.control, "show stats"));
    EXPECT_EQ(stats.at("accepted"), "1");
    EXPECT_EQ(stats.at("bytes_to_upstream"), "1000");
    EXPECT_EQ(stats.at("bytes_to_client"), "1000");
    EXPECT_TRUE(stats.count("closed_clean") == 1);
    EXPECT_TRUE(stats.count("cqes_per_enter") == 1);

    const std::string routes = control_command(fwd.control, "show routes");
    EXPECT_EQ(routes, fmt::format("route=default listen={} balance=round-robin members={} "
                                  "active=0 accepted=1 waiting=0\n",
                                  fwd.endpoint.to_string(), echo.endpoint().to_string()));

    // json: one line, an object or an array of them.
    const std::string info_json = control_command(fwd.control, "show info json");
    EXPECT_THAT(info_json, StartsWith("{\"version\":\""));
    EXPECT_THAT(info_json, HasSubstr(fmt::format("\"pid\":{},", fwd.process->pid())));
    EXPECT_EQ(info_json.back(), '\n');
    EXPECT_EQ(info_json.find('\n'), info_json.size() - 1);
    EXPECT_THAT(control_command(fwd.control, "show stats json"), HasSubstr("\"accepted\":1,"));
    EXPECT_THAT(control_command(fwd.control, "show routes json"),
                StartsWith("[{\"route\":\"default\",\"listen\":[\""));
    EXPECT_THAT(control_command(fwd.control, "help json"), StartsWith("[{\"usage\":\"help\""));

    EXPECT_EQ(control_command(fwd.control, "show stat"),
              "error: unknown command \"show stat\" (did you mean \"show stats\"?)\n");
    EXPECT_EQ(control_command(fwd.control, "show info please"),
              "error: show info: too many arguments; usage: show info\n");

    // Several commands on one connection, sent at once: one reply each, in order.
    const UniqueFd fd = connect_unix(fwd.control);
    ASSERT_TRUE(fd);
    ASSERT_EQ(send_text(fd.get(), "show info\nbad\nshow routes\n", Deadline{5s}).status,
              IoStatus::Ok);
    EXPECT_THAT(read_reply(fd.get(), Deadline{5s}).value_or(""), StartsWith("version "));
    EXPECT_THAT(read_reply(fd.get(), Deadline{5s}).value_or(""), StartsWith("error: "));
    EXPECT_THAT(read_reply(fd.get(), Deadline{5s}).value_or(""), StartsWith("route=default "));
}

TEST(ControlSocket, CtlExitStatuses) {
    TempDir dir;
    EchoServer echo;
    Forwarder fwd = start_with_control(dir, echo);

    const CtlRun ok = run_ctl({"--control", fwd.control, "show", "info"});
    EXPECT_EQ(ok.status.code, 0) << ok.err;
    EXPECT_THAT(ok.out, StartsWith("version "));
    EXPECT_EQ(ok.out.find("\n\n"), std::string::npos); // the empty line is not printed

    const CtlRun bad = run_ctl({"--control", fwd.control, "show", "nothing"});
    EXPECT_EQ(bad.status.code, 1);
    EXPECT_THAT(bad.err, StartsWith("error: unknown command \"show nothing\""));
    EXPECT_EQ(bad.out, "");

    const std::string missing = dir.file("missing.sock");
    const CtlRun none = run_ctl({"--control", missing, "show", "info"});
    EXPECT_EQ(none.status.code, 2);
    EXPECT_THAT(none.err, HasSubstr("cannot connect to control socket " + missing));

    const CtlRun no_path = run_ctl({"show", "info"});
    EXPECT_EQ(no_path.status.code, 2);
    EXPECT_THAT(no_path.err, HasSubstr("give --control PATH"));

    const ConfigFile without{fmt::format("[[route]]\nname = \"a\"\nlisten = \":1\"\n"
                                         "  [[route.upstream]]\n  address = \"{}\"\n",
                                         echo.endpoint().to_string())};
    const CtlRun no_key = run_ctl({"--config", without.path(), "show", "info"});
    EXPECT_EQ(no_key.status.code, 2);
    EXPECT_THAT(no_key.err, HasSubstr("sets no control socket ([engine] control)"));
}

// 10 000 lines of random bytes on one connection (each answered by one error line), a
// line without end on another (refused and closed at 4 KiB), and 100 idle clients: the
// engine forwards throughout and the socket still answers.
TEST(ControlSocket, GarbageEndlessLinesAndIdleClientsChangeNothing) {
    TempDir dir;
    EchoServer echo;
    Forwarder fwd = start_with_control(dir, echo);

    {
        const UniqueFd fd = connect_unix(fwd.control);
        ASSERT_TRUE(fd);
        std::mt19937 random(22);
        std::string garbage;
        constexpr int kLines = 10000;
        for (int i = 0; i < kLines; ++i) {
            const std::size_t length = 1 + random() % 120;
            for (std::size_t j = 0; j < length; ++j) {
                char c = static_cast<char>(random() % 256);
                garbage += c == '\n' ? 'n' : c;
            }
            garbage += '\n';
        }
        // Read while writing: the server answers one line at a time, and stops reading
        // while a reply waits for us.
        std::size_t replies = 0; // each ends with an empty line: "\n\n"
        std::thread reader([&] {
            char buffer[65536];
            char previous = 0;
            const Deadline deadline{30s};
            while (replies < kLines && !deadline.expired()) {
                pollfd p{fd.get(), POLLIN, 0};
                if (::poll(&p, 1, deadline.poll_timeout_ms()) <= 0)
                    break;
                const ssize_t n = ::recv(fd.get(), buffer, sizeof buffer, 0);
                if (n <= 0)
                    break;
                for (ssize_t i = 0; i < n; ++i) {
                    if (buffer[i] == '\n' && previous == '\n')
                        ++replies;
                    previous = buffer[i];
                }
            }
        });
        EXPECT_EQ(send_text(fd.get(), garbage, Deadline{30s}).status, IoStatus::Ok);
        reader.join();
        EXPECT_EQ(replies, static_cast<std::size_t>(kLines));
    }
    EXPECT_TRUE(forwards(fwd.endpoint));

    {
        const UniqueFd fd = connect_unix(fwd.control);
        ASSERT_TRUE(fd);
        const std::string endless(1 << 20, 'a');
        // Refused at 4 KiB and closed: the send fails (EPIPE, ECONNRESET) or the kernel's
        // buffers take the rest; either way the reply and the end follow.
        (void)send_text(fd.get(), endless, Deadline{5s});
        std::string got;
        recv_until_eof(fd.get(), Deadline{5s}, [&](std::span<const std::byte> chunk) {
            got.append(reinterpret_cast<const char*>(chunk.data()), chunk.size());
        });
        EXPECT_EQ(got, "error: line too long (at most 4096 bytes)\n\n");
    }
    EXPECT_TRUE(forwards(fwd.endpoint));

    std::vector<UniqueFd> idle;
    for (int i = 0; i < 100; ++i) {
        idle.push_back(connect_unix(fwd.control));
        ASSERT_TRUE(idle.back()) << i;
    }
    EXPECT_TRUE(forwards(fwd.endpoint));
    // A newcomer takes the place of the client idle longest.
    const CtlRun run = run_ctl({"--control", fwd.control, "show", "info"});
    EXPECT_EQ(run.status.code, 0) << run.err;
    EXPECT_THAT(run.out, HasSubstr(fmt::format("pid {}\n", fwd.process->pid())));
    EXPECT_TRUE(forwards(fwd.endpoint));
}

TEST(ControlSocket, RemovedOnExit) {
    TempDir dir;
    EchoServer echo;
    Forwarder fwd = start_with_control(dir, echo);
    ASSERT_TRUE(identify(fwd.control).exists);
    stop(*fwd.process);
    EXPECT_FALSE(identify(fwd.control).exists);
}

TEST(ControlSocket, ALiveSocketAtThePathIsRefusedAndLeft) {
    TempDir dir;
    EchoServer echo;
    Forwarder first = start_with_control(dir, echo);
    EXPECT_THAT(failed_start({"--listen", "127.0.0.1:0", "--upstream", echo.endpoint().to_string(),
                              "--control", first.control, "--shards", "1"}),
                HasSubstr(fmt::format("control socket {}: it is in use by another process",
                                      first.control)));
    // The first one's socket is untouched and answers.
    EXPECT_THAT(control_command(first.control, "show info"),
                HasSubstr(fmt::format("pid {}\n", first.process->pid())));
}

TEST(ControlSocket, AStaleSocketIsReplacedAndAnotherFileLeft) {
    TempDir dir;
    EchoServer echo;
    // A socket file nobody listens on any more: left by a process that was killed.
    ASSERT_TRUE(leave_stale_socket(dir.file("control.sock"), SOCK_STREAM));
    ASSERT_TRUE(identify(dir.file("control.sock")).exists);
    {
        Forwarder fwd = start_with_control(dir, echo);
        EXPECT_THAT(control_command(fwd.control, "show info"), StartsWith("version "));
    }
    std::ofstream(dir.file("control.sock")) << "not a socket\n";
    EXPECT_THAT(failed_start({"--listen", "127.0.0.1:0", "--upstream", echo.endpoint().to_string(),
                              "--control", dir.file("control.sock"), "--shards", "1"}),
                HasSubstr("is a regular file, not a socket"));
    EXPECT_EQ(contents(dir.file("control.sock")), "not a socket\n");
}

TEST(ControlSocket, KeptAcrossABinaryUpgrade) {
    TempDir dir;
    EchoServer echo;
    const uint16_t port = listen_on(Endpoint::parse("127.0.0.1:0")).endpoint().port;
    const std::vector<std::string> args = {"--listen",         fmt::format("127.0.0.1:{}", port),
                                           "--upstream",       echo.endpoint().to_string(),
                                           "--control",        dir.file("control.sock"),
                                           "--shards",         "1",
                                           "--upgrade-socket", dir.file("upgrade.sock")};
    auto old_process = std::make_unique<BinaryProcess>(uring_fwd_binary(), args);
    ASSERT_TRUE(old_process->wait_listening(Deadline{10s})) << old_process->stderr_text();
    struct stat before {};
    ASSERT_EQ(::lstat(dir.file("control.sock").c_str(), &before), 0);

    BinaryProcess successor{uring_fwd_binary(), args};
    ASSERT_TRUE(successor.wait_listening(Deadline{10s})) << successor.stderr_text();
    const std::optional<ExitStatus> old_status = old_process->wait_exit(Deadline{10s});
    ASSERT_TRUE(old_status) << old_process->stderr_text();
    EXPECT_EQ(old_status->code, 0) << old_process->stderr_text();

    // The same socket file, answered by the successor.
    struct stat after {};
    ASSERT_EQ(::lstat(dir.file("control.sock").c_str(), &after), 0);
    EXPECT_EQ(after.st_ino, before.st_ino);
    EXPECT_THAT(control_command(dir.file("control.sock"), "show info"),
                HasSubstr(fmt::format("pid {}\n", successor.pid())));
    EXPECT_TRUE(forwards(Endpoint::parse(fmt::format("127.0.0.1:{}", port))));

    // And the successor removes it when it goes.
    successor.signal(SIGTERM);
    ASSERT_TRUE(successor.wait_exit(Deadline{10s}));
    EXPECT_FALSE(identify(dir.file("control.sock")).exists);
}

} // namespace
} // namespace uringfwd::test
