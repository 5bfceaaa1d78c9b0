// Binary upgrade through --upgrade-socket: a second process takes over the running
// one's listening sockets (SCM_RIGHTS), and the old one stops accepting and drains.
// Clients connecting in a tight loop meanwhile are never refused or reset, and a
// transfer in flight in the old process finishes intact.
#include "tests/support/binary_process.hpp"
#include "tests/support/echo_server.hpp"
#include "tests/support/exchange.hpp"
#include "tests/support/payload.hpp"
#include "tests/support/proc_stats.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/temp_config_file.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

struct LoopFigures {
    std::atomic<uint64_t> attempted{0};
    std::atomic<uint64_t> served{0};  // echoed intact
    std::atomic<uint64_t> refused{0}; // ECONNREFUSED
    std::atomic<uint64_t> reset{0};   // ECONNRESET, or EOF before the echo
    std::atomic<uint64_t> other{0};   // anything else (timeouts)
    std::string first_failure;        // written by the loop's thread, read after join
};

// Opens connections one after another, each a 64-byte echo exchange, until `stop`.
void connect_loop(const Endpoint& at, const std::atomic<bool>& stop, LoopFigures& figures) {
    const Deadline cap{10s};
    while (!stop.load() && !cap.expired() && figures.attempted.load() < 200000) {
        ++figures.attempted;
        UniqueFd fd;
        const int err = try_connect(at, 5000ms, fd);
        if (err != 0) {
            ++(err == ECONNREFUSED ? figures.refused : figures.other);
            if (figures.first_failure.empty())
                figures.first_failure = fmt::format("connect: {}", std::strerror(err));
            continue;
        }
        const ExchangeResult r = exchange(fd, source_plan(64, 3), Deadline{5s});
        if (r.received == 64 && r.received_sha256 == payload_sha256(3, 64))
            ++figures.served;
        else if (r.recv_error == ECONNRESET || r.send_error == ECONNRESET ||
                 r.recv_status == IoStatus::Eof)
            ++figures.reset;
        else
            ++figures.other;
        if (figures.first_failure.empty() && figures.served.load() != figures.attempted.load())
            figures.first_failure =
                fmt::format("connection {}: {}", figures.attempted.load(), r.describe());
    }
}

TEST(Upgrade, NewProcessTakesOverWithoutRefusingOrResettingAConnection) {
    EchoServer echo;
    const Endpoint at{Endpoint::Kind::Inet, "127.0.0.1", free_port()};
    const std::string control = unique_unix_path("upgrade");
    // Two shards: an SO_REUSEPORT group of two sockets, both of which must pass.
    const ConfigFile file{
        fmt::format("[engine]\nshards = 2\nupgrade_socket = \"{}\"\n[[route]]\nname = \"web\"\n"
                    "listen = \"{}\"\n  [[route.upstream]]\n  address = \"{}\"\n",
                    control, at.to_string(), echo.endpoint().to_string())};
    auto old_process = std::make_unique<BinaryProcess>(
        uring_fwd_binary(), std::vector<std::string>{"--config", file.path()});
    ASSERT_TRUE(old_process->wait_listening(Deadline{10s})) << old_process->stderr_text();

    // In flight in the old process across the whole upgrade: 4 MiB echoed back, read
    // at 4 MiB/s, so about a second.
    constexpr uint64_t kTransfer = 4 << 20;
    UniqueFd transfer_fd = connect_to(at, 5000ms);
    ExchangeResult transfer;
    std::thread transfer_thread([&] {
        ExchangePlan plan = source_plan(kTransfer, 11);
        plan.order = ExchangePlan::Order::Concurrent;
        plan.read_bytes_per_sec = 4 << 20;
        transfer = exchange(transfer_fd, plan, Deadline{15s});
    });

    LoopFigures figures;
    std::atomic<bool> stop{false};
    std::thread loop([&] { connect_loop(at, stop, figures); });
    std::this_thread::sleep_for(100ms);
    const uint64_t before = figures.attempted.load();

    BinaryProcess new_process{uring_fwd_binary(), {"--config", file.path()}};
    const bool took_over = eventually(
        [&] {
            return new_process.stderr_text().find("stopped accepting and drains") !=
                   std::string::npos;
        },
        Deadline{10s});
    // The old process exits once its last connection (the transfer) is done.
    const std::optional<ExitStatus> old_status = old_process->wait_exit(Deadline{15s});
    std::this_thread::sleep_for(100ms); // the new one alone for a moment
    stop.store(true);
    loop.join();
    transfer_thread.join();

    ASSERT_TRUE(took_over) << new_process.stderr_text() << old_process->stderr_text();
    ASSERT_TRUE(old_status) << old_process->stderr_text();
    EXPECT_TRUE(old_status->exited && old_status->code == 0) << old_status->describe();
    std::printf("[ upgrade  ] connections attempted %llu (%llu before the new process), "
                "served %llu, refused %llu, reset %llu, other %llu\n",
                static_cast<unsigned long long>(figures.attempted.load()),
                static_cast<unsigned long long>(before),
                static_cast<unsigned long long>(figures.served.load()),
                static_cast<unsigned long long>(figures.refused.load()),
                static_cast<unsigned long long>(figures.reset.load()),
                static_cast<unsigned long long>(figures.other.load()));
    EXPECT_EQ(figures.refused.load(), 0u) << figures.first_failure;
    EXPECT_EQ(figures.reset.load(), 0u);
    EXPECT_EQ(figures.other.load(), 0u) << figures.first_failure;
    EXPECT_EQ(figures.served.load(), figures.attempted.load());
    EXPECT_GT(figures.attempted.load(), before);
    EXPECT_EQ(transfer.received, kTransfer) << transfer.describe();
    EXPECT_EQ(transfer.received_sha256, payload_sha256(11, kTransfer)) << transfer.describe();
    EXPECT_NE(old_process->stderr_text().find("handed it 2"), std::string::npos)
        << old_process->stderr_text();
    EXPECT_NE(new_process.stderr_text().find("adopting 2 inherited listening sockets"),
              std::string::npos)
        << new_process.stderr_text();

    // The new process owns the control socket now: a third one takes over from it.
    BinaryProcess third{uring_fwd_binary(), {"--config", file.path()}};
    EXPECT_TRUE(third.logs("stopped accepting and drains", Deadline{10s})) << third.stderr_text();
    EXPECT_TRUE(new_process.wait_exit(Deadline{10s}));
    UniqueFd last = connect_to(at, 5000ms);
    const ExchangeResult r = exchange(last, source_plan(64, 3), Deadline{5s});
    EXPECT_EQ(r.received_sha256, payload_sha256(3, 64));
}

TEST(Upgrade, AFailedSuccessorLeavesTheOldProcessServing) {
    EchoServer echo;
    const Endpoint at{Endpoint::Kind::Inet, "127.0.0.1", free_port()};
    const std::string control = unique_unix_path("upgrade-fail");
    const std::string route = fmt::format("[[route]]\nname = \"web\"\nlisten = \"{}\"\n"
                                          "  [[route.upstream]]\n  address = \"{}\"\n",
                                          at.to_string(), echo.endpoint().to_string());
    const ConfigFile file{
        fmt::format("[engine]\nshards = 2\nupgrade_socket = \"{}\"\n{}", control, route)};
    BinaryProcess old_process{uring_fwd_binary(), {"--config", file.path()}};
    ASSERT_TRUE(old_process.wait_listening(Deadline{10s})) << old_process.stderr_text();
    // One shard cannot serve two sockets of a reuseport group (the kernel would keep
    // queueing clients on the second): it refuses to start, and the old process
    // keeps its sockets.
    BinaryProcess failing{uring_fwd_binary(), {"--config", file.path(), "--shards", "1"}};
    const std::optional<ExitStatus> status = failing.wait_exit(Deadline{10s});
    ASSERT_TRUE(status) << "still running; its stderr:\n"
                        << failing.stderr_text() << "\nthe old process's:\n"
                        << old_process.stderr_text();
    EXPECT_EQ(status->code, 1);
    EXPECT_NE(failing.stderr_text().find("2 inherited listening sockets for " + at.to_string() +
                                         ", but 1 shard:"),
              std::string::npos)
        << failing.stderr_text();
    EXPECT_TRUE(eventually(
        [&] { return old_process.stderr_text().find("serving on") != std::string::npos; },
        Deadline{5s}))
        << old_process.stderr_text();
    for (int i = 0; i < 10; ++i) {
        UniqueFd fd = connect_to(at, 5000ms);
        const ExchangeResult r = exchange(fd, source_plan(64, 3), Deadline{5s});
        ASSERT_EQ(r.received_sha256, payload_sha256(3, 64)) << i;
    }
}

// A successor whose configuration leaves out an address the old process serves would
// take that socket and serve it not, while the old one stops accepting on it (the
// issue: 19000 then refused its clients). It refuses the take-over instead, naming the
// address, and the old process keeps serving every address.
TEST(Upgrade, ASuccessorThatWouldNotServeAnAddressRefusesToTakeOver) {
    EchoServer echo;
    const std::vector<uint16_t> ports = free_ports(3);
    const Endpoint kept{Endpoint::Kind::Inet, "127.0.0.1", ports[0]};
    const Endpoint dropped{Endpoint::Kind::Inet, "127.0.0.1", ports[1]};
    const Endpoint other{Endpoint::Kind::Inet, "127.0.0.1", ports[2]};
    const std::string control = unique_unix_path("upgrade-drop");
    const ConfigFile file{
        fmt::format("[engine]\nshards = 2\nupgrade_socket = \"{}\"\n[[route]]\nname = \"web\"\n"
                    "listen = [\"{}\", \"{}\"]\n  [[route.upstream]]\n  address = \"{}\"\n",
                    control, kept.to_string(), dropped.to_string(), echo.endpoint().to_string())};
    BinaryProcess old_process{uring_fwd_binary(), {"--config", file.path()}};
    ASSERT_TRUE(old_process.wait_listening(Deadline{10s})) << old_process.stderr_text();

    // Only a new address, as in the issue; then one of the two old ones but not the other.
    const std::vector<std::vector<std::string>> successors{
        {"--listen", other.to_string()},
        {"--listen", kept.to_string()},
    };
    for (const std::vector<std::string>& listen : successors) {
        std::vector<std::string> args = listen;
        for (const std::string& a :
             {std::string("--upstream"), echo.endpoint().to_string(), std::string("--shards"),
              std::string("2"), std::string("--upgrade-socket"), control})
            args.push_back(a);
        BinaryProcess successor{uring_fwd_binary(), args};
        const std::optional<ExitStatus> status = successor.wait_exit(Deadline{10s});
        ASSERT_TRUE(status) << "took over; its stderr:\n"
                            << successor.stderr_text() << "\nthe old process's:\n"
                            << old_process.stderr_text();
        EXPECT_EQ(status->code, 1) << status->describe();
        const std::string err = successor.stderr_text();
        EXPECT_NE(err.find(dropped.to_string() + " (2 sockets) match no listen address"),
                  std::string::npos)
            << err;
        EXPECT_NE(err.find("serves on"), std::string::npos) << err;
        for (const Endpoint& at : {kept, dropped}) {
            for (int i = 0; i < 5; ++i) {
                UniqueFd fd = connect_to(at, 5000ms);
                const ExchangeResult r = exchange(fd, source_plan(64, 3), Deadline{5s});
                ASSERT_EQ(r.received_sha256, payload_sha256(3, 64)) << at.to_string() << " " << i;
            }
        }
    }
    EXPECT_EQ(old_process.stderr_text().find("accepts now;"), std::string::npos)
        << old_process.stderr_text();
}

// The successor started on SIGRTMIN+1 is the old process's child; once that one exits it
// would be reparented out of our reach. As a subreaper for this test we get it, and end
// and reap it ourselves.
class Subreaper {
public:
    Subreaper() { ::prctl(PR_SET_CHILD_SUBREAPER, 1); }
    ~Subreaper() {
        if (pid_ > 0) {
            ::kill(pid_, SIGTERM);
            const Deadline deadline{5s};
            while (::waitpid(pid_, nullptr, WNOHANG) == 0) {
                if (deadline.expired()) {
                    ::kill(pid_, SIGKILL);
                    ::waitpid(pid_, nullptr, 0);
                    break;
                }
                std::this_thread::sleep_for(10ms);
            }
        }
        ::prctl(PR_SET_CHILD_SUBREAPER, 0);
    }
    void adopt(pid_t pid) { pid_ = pid; }

private:
    pid_t pid_ = -1;
};

TEST(Upgrade, UpgradeSignalStartsTheSuccessorWhichTakesOver) {
    Subreaper reaper;
    EchoServer echo;
    const Endpoint at{Endpoint::Kind::Inet, "127.0.0.1", free_port()};
    const std::string control = unique_unix_path("upgrade-usr2");
    const ConfigFile file{
        fmt::format("[engine]\nshards = 2\nupgrade_socket = \"{}\"\n[[route]]\nname = \"web\"\n"
                    "listen = \"{}\"\n  [[route.upstream]]\n  address = \"{}\"\n",
                    control, at.to_string(), echo.endpoint().to_string())};
    BinaryProcess old_process{uring_fwd_binary(), {"--config", file.path()}};
    ASSERT_TRUE(old_process.wait_listening(Deadline{10s})) << old_process.stderr_text();
    UniqueFd before = connect_to(at, 5000ms); // open across the upgrade

    old_process.signal(SIGRTMIN + 1);
    // The successor writes to the same stderr as its parent.
    const std::string started = "SIGRTMIN+1: started ";
    ASSERT_TRUE(eventually(
        [&] { return old_process.stderr_text().find(" accepts now; ") != std::string::npos; },
        Deadline{10s}))
        << old_process.stderr_text();
    const std::string err = old_process.stderr_text();
    const std::size_t at_pid = err.find(" as process ", err.find(started));
    ASSERT_NE(at_pid, std::string::npos) << err;
    const pid_t successor = static_cast<pid_t>(std::atol(err.c_str() + at_pid + 12));
    ASSERT_GT(successor, 0) << err;
    reaper.adopt(successor);

    const ExchangeResult open = exchange(before, source_plan(4096, 5), Deadline{5s});
    EXPECT_EQ(open.received_sha256, payload_sha256(5, 4096)) << open.describe();
    const std::optional<ExitStatus> old_status = old_process.wait_exit(Deadline{10s});
    ASSERT_TRUE(old_status) << old_process.stderr_text();
    EXPECT_EQ(old_status->code, 0);
    EXPECT_EQ(::kill(successor, 0), 0) << "the successor serves on";
    for (int i = 0; i < 10; ++i) {
        UniqueFd fd = connect_to(at, 5000ms);
        const ExchangeResult r = exchange(fd, source_plan(64, 3), Deadline{5s});
        ASSERT_EQ(r.received_sha256, payload_sha256(3, 64)) << i;
    }
}

} // namespace
} // namespace uringfwd::test
