// The binary under a service manager: sd_notify(3) messages on $NOTIFY_SOCKET at the
// right moments (READY=1 only once clients are served, RELOADING=1/READY=1 around
// SIGHUP, STOPPING=1 on SIGTERM), and socket activation: listening sockets the test
// bound itself, passed as fds 3.. with LISTEN_FDS/LISTEN_PID, served by every shard.
#include "tests/support/binary_process.hpp"
#include "tests/support/echo_server.hpp"
#include "tests/support/exchange.hpp"
#include "tests/support/payload.hpp"
#include "tests/support/proc_stats.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/temp_config_file.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

// The service manager's end: a datagram socket the binary sends its states to.
class NotifyReceiver {
public:
    // `abstract`: "@name" in the abstract namespace instead of a path.
    explicit NotifyReceiver(bool abstract) : fd_(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) {
        const std::string name = unique_unix_path("notify");
        sockaddr_un address{};
        address.sun_family = AF_UNIX;
        std::memcpy(address.sun_path, name.data(), name.size());
        socklen_t length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
        if (abstract) {
            address.sun_path[0] = '\0';
            env_ = "NOTIFY_SOCKET=@" + name.substr(1);
        } else {
            path_ = name;
            ++length;
            env_ = "NOTIFY_SOCKET=" + name;
        }
        if (::bind(fd_.get(), reinterpret_cast<sockaddr*>(&address), length) != 0)
            throw std::system_error(errno, std::generic_category(), "bind notify socket");
        // Each message comes with its sender's credentials, as systemd reads them: it
        // tells the old process's messages from the successor's in an upgrade.
        const int on = 1;
        if (::setsockopt(fd_.get(), SOL_SOCKET, SO_PASSCRED, &on, sizeof(on)) != 0)
            throw std::system_error(errno, std::generic_category(), "SO_PASSCRED");
    }
    ~NotifyReceiver() {
        if (!path_.empty())
            ::unlink(path_.c_str());
    }
    const std::string& env() const { return env_; }

    struct Notice {
        std::string text;
        pid_t sender = -1; // from SCM_CREDENTIALS
    };

    // The next message and who sent it, or nullopt after `timeout`.
    std::optional<Notice> next_notice(milliseconds timeout) {
        timeval tv{static_cast<time_t>(timeout.count() / 1000),
                   static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
        ::setsockopt(fd_.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        char buffer[4096];
        iovec iov{buffer, sizeof(buffer)};
        alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred))];
        msghdr msg{};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control;
        msg.msg_controllen = sizeof(control);
        const ssize_t n = ::recvmsg(fd_.get(), &msg, 0);
        if (n <= 0)
            return std::nullopt;
        Notice notice{std::string(buffer, static_cast<std::size_t>(n))};
        for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
                ucred cred{};
                std::memcpy(&cred, CMSG_DATA(c), sizeof(cred));
                notice.sender = cred.pid;
            }
        }
        return notice;
    }
    // The next message, or nullopt after `timeout`.
    std::optional<std::string> next(milliseconds timeout) {
        std::optional<Notice> notice = next_notice(timeout);
        if (!notice)
            return std::nullopt;
        return std::move(notice->text);
    }

private:
    UniqueFd fd_;
    std::string path_;
    std::string env_;
};

bool has_line(const std::string& message, const std::string& line) {
    return ("\n" + message + "\n").find("\n" + line + "\n") != std::string::npos;
}

// One echo exchange through `proxy`: the bytes come back intact.
bool echoes(const Endpoint& proxy) {
    UniqueFd fd = connect_to(proxy, 5000ms);
    const ExchangeResult r = exchange(fd, source_plan(4096, 7), Deadline{5s});
    return r.received == 4096 && r.received_sha256 == payload_sha256(7, 4096);
}

std::string route_file(const std::string& listen, const Endpoint& upstream) {
    return fmt::format("[engine]\nshards = 2\ndrain_timeout = \"1s\"\n[[route]]\nname = "
                       "\"web\"\nlisten = {}\n  [[route.upstream]]\n  address = \"{}\"\n",
                       listen, upstream.to_string());
}

void check_notifications(bool abstract) {
    EchoServer echo;
    NotifyReceiver manager{abstract};
    // A fixed address (a path), so that SIGHUP reading the file keeps it.
    const std::string path = unique_unix_path("notified");
    const ConfigFile file{route_file(fmt::format("\"unix:{}\"", path), echo.endpoint())};
    BinaryProcess fwd{uring_fwd_binary(), {"--config", file.path()}, {{manager.env()}, {}}};

    const std::optional<std::string> ready = manager.next(10000ms);
    ASSERT_TRUE(ready) << fwd.stderr_text();
    EXPECT_TRUE(has_line(*ready, "READY=1")) << *ready;
    EXPECT_NE(ready->find("STATUS=serving: listening on unix:" + path), std::string::npos)
        << *ready;
    // READY=1 was the first message, and at that moment clients are served already.
    const std::optional<Endpoint> at = fwd.wait_listening(Deadline{5s});
    ASSERT_TRUE(at);
    EXPECT_TRUE(echoes(*at));

    fwd.signal(SIGHUP);
    const std::optional<std::string> reloading = manager.next(5000ms);
    ASSERT_TRUE(reloading);
    EXPECT_TRUE(has_line(*reloading, "RELOADING=1")) << *reloading;
    EXPECT_NE(reloading->find("\nMONOTONIC_USEC="), std::string::npos) << *reloading;
    const std::optional<std::string> reloaded = manager.next(5000ms);
    ASSERT_TRUE(reloaded);
    EXPECT_TRUE(has_line(*reloaded, "READY=1")) << *reloaded;
    EXPECT_TRUE(
        eventually([&] { return fwd.stderr_text().find("SIGHUP: reloaded") != std::string::npos; },
                   Deadline{5s}))
        << fwd.stderr_text();
    EXPECT_TRUE(echoes(*at));

    fwd.signal(SIGTERM);
    const std::optional<std::string> stopping = manager.next(5000ms);
    ASSERT_TRUE(stopping);
    EXPECT_TRUE(has_line(*stopping, "STOPPING=1")) << *stopping;
    const std::optional<ExitStatus> status = fwd.wait_exit(Deadline{5s});
    ASSERT_TRUE(status);
    EXPECT_TRUE(status->exited && status->code == 0) << status->describe();
    EXPECT_FALSE(manager.next(100ms)) << "nothing after STOPPING=1";
}

TEST(Service, NotifiesReadyReloadingAndStoppingOnAPathSocket) {
    check_notifications(false);
}

TEST(Service, NotifiesOnAnAbstractSocket) {
    check_notifications(true);
}

// A binary upgrade under systemd (Type=notify, NotifyAccess=all): the successor tells
// the manager it is the main process now (MAINPID=its pid, with READY=1), and the old
// process, which drains and exits, never sends STOPPING=1: systemd would take that for
// the service stopping and kill the successor with it.
TEST(Service, AnUpgradeHandsTheMainPidToTheSuccessorAndTheOldProcessNeverSaysStopping) {
    EchoServer echo;
    NotifyReceiver manager{false};
    const std::string path = unique_unix_path("upgraded");
    const std::string control = unique_unix_path("upgrade-notify");
    std::string config = route_file(fmt::format("\"unix:{}\"", path), echo.endpoint());
    config.insert(std::string_view("[engine]\n").size(),
                  fmt::format("upgrade_socket = \"{}\"\n", control));
    const ConfigFile file{config};
    auto old_process = std::make_unique<BinaryProcess>(
        uring_fwd_binary(), std::vector<std::string>{"--config", file.path()},
        SpawnOptions{{manager.env()}, {}});
    const pid_t old_pid = old_process->pid();
    const std::optional<NotifyReceiver::Notice> ready = manager.next_notice(10000ms);
    ASSERT_TRUE(ready) << old_process->stderr_text();
    EXPECT_EQ(ready->sender, old_pid);
    EXPECT_TRUE(has_line(ready->text, "READY=1")) << ready->text;
    const std::optional<Endpoint> at = old_process->wait_listening(Deadline{5s});
    ASSERT_TRUE(at);

    BinaryProcess successor{uring_fwd_binary(), {"--config", file.path()}, {{manager.env()}, {}}};
    // Every message until the old process has exited, by sender.
    std::vector<NotifyReceiver::Notice> from_old;
    std::vector<NotifyReceiver::Notice> from_successor;
    std::optional<ExitStatus> old_status;
    const Deadline deadline{15s};
    while (!old_status && !deadline.expired()) {
        while (std::optional<NotifyReceiver::Notice> n = manager.next_notice(50ms))
            (n->sender == old_pid ? from_old : from_successor).push_back(std::move(*n));
        old_status = old_process->wait_exit(Deadline{50ms});
    }
    // Anything the old process sent just before it exited is queued by now.
    while (std::optional<NotifyReceiver::Notice> n = manager.next_notice(100ms))
        (n->sender == old_pid ? from_old : from_successor).push_back(std::move(*n));
    ASSERT_TRUE(old_status) << old_process->stderr_text() << successor.stderr_text();
    EXPECT_TRUE(old_status->exited && old_status->code == 0) << old_status->describe();

    for (const NotifyReceiver::Notice& n : from_old)
        EXPECT_FALSE(has_line(n.text, "STOPPING=1")) << "the old process said: " << n.text;
    ASSERT_FALSE(from_successor.empty()) << successor.stderr_text();
    const NotifyReceiver::Notice& first = from_successor.front();
    EXPECT_EQ(first.sender, successor.pid());
    EXPECT_TRUE(has_line(first.text, fmt::format("MAINPID={}", successor.pid()))) << first.text;
    EXPECT_TRUE(has_line(first.text, "READY=1")) << first.text;
    EXPECT_TRUE(echoes(*at)) << "the successor serves the same address";

    // The receiver would have seen a STOPPING=1: the successor's own stop sends one.
    successor.signal(SIGTERM);
    const std::optional<NotifyReceiver::Notice> stopping = manager.next_notice(5000ms);
    ASSERT_TRUE(stopping);
    EXPECT_EQ(stopping->sender, successor.pid());
    EXPECT_TRUE(has_line(stopping->text, "STOPPING=1")) << stopping->text;
}

TEST(Service, ServesSocketsPassedBySocketActivation) {
    EchoServer echo;
    Listener tcp = listen_on(Endpoint::parse("127.0.0.1:0"));
    Listener unix_socket = listen_loopback(Family::Unix);
    Listener unrelated = listen_on(Endpoint::parse("127.0.0.1:0"));
    // A client that connected before the binary even ran waits in the backlog of the
    // passed socket and is served once it starts: the same socket, not a new bind.
    UniqueFd early = connect_to(tcp.endpoint(), 5000ms);

    const ConfigFile file{route_file(fmt::format("[\"{}\", \"{}\"]", tcp.endpoint().to_string(),
                                                 unix_socket.endpoint().to_string()),
                                     echo.endpoint())};
    BinaryProcess fwd{uring_fwd_binary(),
                      {"--config", file.path()},
                      {{}, {tcp.fd(), unix_socket.fd(), unrelated.fd()}}};
    ASSERT_TRUE(fwd.wait_listening(Deadline{10s})) << fwd.stderr_text();

    const ExchangeResult r = exchange(early, source_plan(4096, 7), Deadline{5s});
    EXPECT_EQ(r.received_sha256, payload_sha256(7, 4096)) << r.describe();
    // Every shard accepts on the one passed socket: many clients, all served.
    for (int i = 0; i < 20; ++i) {
        ASSERT_TRUE(echoes(tcp.endpoint())) << i;
        ASSERT_TRUE(echoes(unix_socket.endpoint())) << i;
    }
    const std::string err = fwd.stderr_text();
    EXPECT_NE(err.find(tcp.endpoint().to_string() + ": adopting 1 inherited listening socket"),
              std::string::npos)
        << err;
    EXPECT_NE(err.find("socket activation: 3 listening sockets passed"), std::string::npos) << err;
    EXPECT_NE(err.find(unrelated.endpoint().to_string() + " (fd 5) is no route's listen address"),
              std::string::npos)
        << err;

    fwd.signal(SIGTERM);
    ASSERT_TRUE(fwd.wait_exit(Deadline{5s}));
    // The Unix socket's file belongs to whoever made it (systemd): still there.
    EXPECT_EQ(::access(unix_socket.endpoint().host.c_str(), F_OK), 0);
}

TEST(Service, ThreeFdsOfOneInheritedSocketAreOneSocket) {
    EchoServer echo;
    Listener a = listen_on(Endpoint::parse("127.0.0.1:0"));
    const ConfigFile file{
        route_file(fmt::format("\"{}\"", a.endpoint().to_string()), echo.endpoint())};
    // Three fds of one socket (a process that shared one socket among its shards hands
    // it over once per shard) with two shards: one socket, both shards accept on it.
    BinaryProcess fwd{uring_fwd_binary(),
                      {"--config", file.path(), "--shards", "2"},
                      {{}, {a.fd(), a.fd(), a.fd()}}};
    ASSERT_TRUE(fwd.wait_listening(Deadline{10s})) << fwd.stderr_text();
    EXPECT_TRUE(echoes(a.endpoint()));
    EXPECT_NE(fwd.stderr_text().find("adopting 1 inherited listening socket"), std::string::npos)
        << fwd.stderr_text();
}

} // namespace
} // namespace uringfwd::test
