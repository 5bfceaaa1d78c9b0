// An upgrade that keeps its connections (docs/handover.md): the old process hands its
// open connections to the successor over the upgrade socket, each as soon as it is
// quiet, and exits once the last is gone. Run through the binary on every data path of
// the integration variants (auto, splice, copy, ring splices, plain fds).
#include "tests/support/binary_process.hpp"
#include "tests/support/connection_server.hpp"
#include "tests/support/data_path_under_test.hpp"
#include "tests/support/echo_server.hpp"
#include "tests/support/eventually.hpp"
#include "tests/support/exchange.hpp"
#include "tests/support/payload.hpp"
#include "tests/support/proc_stats.hpp"
#include "tests/support/scripted_peer.hpp"
#include "tests/support/sha256.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/temp_config_file.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/transfer_checks.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

// A client that talks in rounds, as a database or MQTT client does: `chunk` bytes out,
// the same bytes back from the echo upstream, a pause; every byte checked against its
// payload. Runs until told to stop, then FINs and waits for the upstream's FIN.
class RoundTripper {
public:
    RoundTripper(const Endpoint& at, uint64_t seed, std::size_t chunk)
        : fd_(connect_to(at, 5000ms)), payload_(seed), chunk_(chunk) {}

    // One round; false (with `failure` set) when it did not come back intact.
    bool round() {
        std::vector<std::byte> out = payload_.bytes(sent_, chunk_);
        std::vector<std::byte> back(chunk_);
        const IoResult s = send_all(fd_.get(), out, Deadline{10s});
        const IoResult r = s.status == IoStatus::Ok ? recv_all(fd_.get(), back, Deadline{10s}) : s;
        if (r.status != IoStatus::Ok || back != out) {
            failure = fmt::format("round at byte {}: {}", sent_,
                                  r.status != IoStatus::Ok ? to_string(r.status) : "bytes differ");
            return false;
        }
        sent_ += chunk_;
        return true;
    }

    // FIN, then the upstream's FIN back: the end both sides see as clean.
    bool finish() {
        ::shutdown(fd_.get(), SHUT_WR);
        const IoResult end = recv_until_eof(fd_.get(), Deadline{10s});
        if (end.status != IoStatus::Eof)
            failure = "the end: " + to_string(end.status);
        return end.status == IoStatus::Eof;
    }

    uint64_t sent() const { return sent_; }
    std::string failure;

private:
    UniqueFd fd_;
    Payload payload_;
    std::size_t chunk_;
    uint64_t sent_ = 0;
};

std::vector<std::string> lines_of(const std::string& path) {
    std::vector<std::string> out;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);)
        out.push_back(line);
    return out;
}

uint64_t field(const std::string& line, const std::string& key) {
    const std::size_t at = line.find(" " + key + "=");
    return at == std::string::npos ? UINT64_MAX
                                   : std::strtoull(line.c_str() + at + key.size() + 2, nullptr, 10);
}

// The tests' configuration: `shards` shards, the upgrade socket, `engine_extra` lines of
// [engine], and one route named `route` from `listen` to `upstream`.
std::string upgrade_config(int shards, const std::string& upgrade_socket, const std::string& route,
                           const Endpoint& listen, const Endpoint& upstream,
                           const std::string& engine_extra = "") {
    return fmt::format("[engine]\nshards = {}\nupgrade_socket = \"{}\"\n{}[[route]]\n"
                       "name = \"{}\"\nlisten = \"{}\"\n  [[route.upstream]]\n  address = \"{}\"\n",
                       shards, upgrade_socket, engine_extra, route, listen.to_string(),
                       upstream.to_string());
}

struct Upgrader {
    std::string config_path;
    std::vector<std::string> args() const {
        return with_data_path_under_test(uring_fwd_binary(), {"--config", config_path});
    }
};

// 64 connections exchanging rounds the whole time, and 200 idle ones, across three
// upgrades in a row: every round comes back intact, none is reset, each old process
// hands every connection over and exits within 5 s, and the access log has one line
// per connection, written when it really ends, with its total bytes.
TEST(ConnectionHandover, LiveAndIdleConnectionsSurviveThreeUpgrades) {
    EchoServer echo;
    TempDir dir;
    const std::string log_path = dir.path() + "/access.log";
    const Endpoint at{Endpoint::Kind::Inet, "127.0.0.1", free_port()};
    const ConfigFile file{
        upgrade_config(2, dir.path() + "/upgrade.sock", "db", at, echo.endpoint(),
                       fmt::format("access_log = \"{}\"\ndrain_timeout = \"30s\"\n", log_path))};
    const Upgrader upgrader{file.path()};
    auto current = std::make_unique<BinaryProcess>(uring_fwd_binary(), upgrader.args());
    ASSERT_TRUE(current->wait_listening(Deadline{10s})) << current->stderr_text();

    constexpr int kLive = 64;
    constexpr int kIdle = 200;
    std::vector<std::unique_ptr<RoundTripper>> live;
    std::vector<std::unique_ptr<RoundTripper>> idle;
    for (int i = 0; i < kLive; ++i)
        live.push_back(std::make_unique<RoundTripper>(at, 100 + i, 16 * 1024));
    for (int i = 0; i < kIdle; ++i) {
        idle.push_back(std::make_unique<RoundTripper>(at, 500 + i, 100));
        ASSERT_TRUE(idle.back()->round()) << idle.back()->failure;
    }

    // What the first process holds the 264 connections with: slots of its rings' file
    // tables with direct descriptors, plain fds without. A successor adopts them into
    // the same (Connections::move_into_slots), not into two plain fds each.
    const int first_fds = count_open_fds(current->pid());

    std::atomic<bool> stop{false};
    std::atomic<int> failed{0};
    std::vector<std::thread> threads;
    for (auto& client : live) {
        threads.emplace_back([&, c = client.get()] {
            const Deadline cap{60s};
            for (int n = 0; !stop.load() && !cap.expired() && n < 100000; ++n) {
                if (!c->round()) {
                    ++failed;
                    return;
                }
                std::this_thread::sleep_for(2ms);
            }
        });
    }

    for (int upgrade = 1; upgrade <= 3; ++upgrade) {
        std::this_thread::sleep_for(300ms); // traffic before (and between) the upgrades
        auto successor = std::make_unique<BinaryProcess>(uring_fwd_binary(), upgrader.args());
        ASSERT_TRUE(successor->logs("stopped accepting and drains", Deadline{10s}))
            << successor->stderr_text() << current->stderr_text();
        const auto took_over = std::chrono::steady_clock::now();
        const std::optional<ExitStatus> old_status = current->wait_exit(Deadline{5s});
        const auto exited_in = std::chrono::steady_clock::now() - took_over;
        ASSERT_TRUE(old_status) << "upgrade " << upgrade << ": the old process still runs:\n"
                                << current->stderr_text();
        EXPECT_TRUE(old_status->exited && old_status->code == 0) << old_status->describe();
        const std::string err = current->stderr_text();
        EXPECT_NE(err.find(fmt::format("handed {} connections over to process {}", kLive + kIdle,
                                       successor->pid())),
                  std::string::npos)
            << err;
        std::printf("[ handover ] upgrade %d: the old process exited %lld ms after the take-over\n",
                    upgrade,
                    static_cast<long long>(
                        std::chrono::duration_cast<std::chrono::milliseconds>(exited_in).count()));
        // Pipes come and go with the live ones' traffic: up to 2 fds for each (the ring
        // splices hold a pipe per busy direction), a few more either way; the
        // connections in plain fds would be 2 × 264.
        const int successor_fds = count_open_fds(successor->pid());
        EXPECT_LE(successor_fds, first_fds + 2 * kLive + 8)
            << "upgrade " << upgrade << ": the successor has " << successor_fds
            << " fds open, the first process " << first_fds << " for the same connections";
        current = std::move(successor);
    }
    std::this_thread::sleep_for(300ms); // traffic after the last upgrade
    stop.store(true);
    for (std::thread& t : threads)
        t.join();
    EXPECT_EQ(failed.load(), 0);
    for (auto& client : live)
        EXPECT_GT(client->sent(), 16u * 1024) << client->failure;
    for (auto& client : idle)
        ASSERT_TRUE(client->round()) << client->failure;

    uint64_t sent = 0;
    for (auto* clients : {&live, &idle}) {
        for (auto& client : *clients) {
            EXPECT_TRUE(client->finish()) << client->failure;
            sent += client->sent();
        }
    }
    // One line per connection, at its real end, with its whole history.
    std::vector<std::string> lines;
    EXPECT_TRUE(eventually(
        [&] {
            lines = lines_of(log_path);
            return lines.size() >= static_cast<std::size_t>(kLive + kIdle);
        },
        Deadline{5s}));
    std::this_thread::sleep_for(100ms);
    lines = lines_of(log_path);
    ASSERT_EQ(lines.size(), static_cast<std::size_t>(kLive + kIdle));
    uint64_t logged = 0;
    for (const std::string& line : lines) {
        EXPECT_NE(line.find("reason=clean"), std::string::npos) << line;
        EXPECT_EQ(field(line, "bytes_to_upstream"), field(line, "bytes_to_client")) << line;
        logged += field(line, "bytes_to_upstream");
    }
    EXPECT_EQ(logged, sent);
}

// A connection half-closed in either direction before the upgrade goes on half-closed
// after it: the client that sent its FIN still gets the upstream's answer, and the
// client whose upstream sent its FIN still delivers its bytes.
// A stream that never pauses: both directions held back by their readers the whole
// time, so a pipe or a copy buffer always holds bytes of it. The old process's shard
// lets each direction deliver what it holds and take no more, then hands it over (it
// used to keep such a stream to its end): the old process is gone within 2 s of the
// take-over, long before the stream ends, and both streams arrive whole.
TEST(ConnectionHandover, AStreamThatNeverPausesIsHandedOverWhole) {
    constexpr uint64_t kMiB = 1024 * 1024;
    constexpr uint64_t kDown = 48 * kMiB;
    constexpr uint64_t kUp = 24 * kMiB;
    const ExchangePlan upstream_plan =
        paced_duplex_plan(kDown, 51, 6 * kMiB); // about 4 s of upload
    ScriptedPeer peer{upstream_plan};
    TempDir dir;
    const Endpoint at{Endpoint::Kind::Inet, "127.0.0.1", free_port()};
    const ConfigFile file{upgrade_config(2, dir.path() + "/upgrade.sock", "bulk", at,
                                         peer.endpoint(), "drain_timeout = \"30s\"\n")};
    const Upgrader upgrader{file.path()};
    auto first = std::make_unique<BinaryProcess>(uring_fwd_binary(), upgrader.args());
    ASSERT_TRUE(first->wait_listening(Deadline{10s})) << first->stderr_text();

    UniqueFd client = connect_to(at, 5000ms);
    const ExchangePlan client_plan = paced_duplex_plan(kUp, 52, 12 * kMiB); // about 4 s of download
    ExchangeResult mine;
    std::thread client_thread([&] { mine = exchange(client, client_plan, Deadline{60s}); });

    std::this_thread::sleep_for(1s); // well under way
    auto successor = std::make_unique<BinaryProcess>(uring_fwd_binary(), upgrader.args());
    const bool took_over = successor->logs("stopped accepting and drains", Deadline{10s});
    const auto since = std::chrono::steady_clock::now();
    const std::optional<ExitStatus> old_status = first->wait_exit(Deadline{2s});
    const auto exited_in = std::chrono::steady_clock::now() - since;
    client_thread.join();
    ASSERT_TRUE(took_over) << successor->stderr_text() << first->stderr_text();
    ASSERT_TRUE(old_status) << "the old process still runs 2 s after the take-over:\n"
                            << first->stderr_text();
    EXPECT_TRUE(old_status->exited && old_status->code == 0) << old_status->describe();
    EXPECT_NE(first->stderr_text().find(
                  fmt::format("handed 1 connection over to process {}", successor->pid())),
              std::string::npos)
        << first->stderr_text();
    std::printf("[ handover ] a stream that never pauses: the old process exited %lld ms after "
                "the take-over\n",
                static_cast<long long>(
                    std::chrono::duration_cast<std::chrono::milliseconds>(exited_in).count()));
    EXPECT_TRUE(BothWaysIntact(mine, client_plan, peer, upstream_plan, Deadline{30s}));
}

// A client that reads nothing while its download is under way: what it has not taken
// waits in the engine toward it (`data_path`'s pipe or copy chunks, which go into a
// pipe), and that pipe goes to the successor with the connection (docs/handover.md),
// twice in a row. Each old process exits at once rather than after its drain_timeout,
// and once the client reads, every byte arrives once, in order.
void check_a_stuck_download_is_handed_over(const std::string& data_path,
                                           const std::string& engine_extra) {
    constexpr std::size_t kDownload = 16 * 1024 * 1024;
    Listener upstream = listen_loopback(Family::Inet4);
    TempDir dir;
    const Endpoint at{Endpoint::Kind::Inet, "127.0.0.1", free_port()};
    const ConfigFile file{upgrade_config(2, dir.path() + "/upgrade.sock", "bulk", at,
                                         upstream.endpoint(),
                                         "drain_timeout = \"30s\"\n" + engine_extra)};
    const std::vector<std::string> args = with_data_path_under_test(
        uring_fwd_binary(), {"--config", file.path(), "--data-path", data_path});
    auto old_process = std::make_unique<BinaryProcess>(uring_fwd_binary(), args);
    ASSERT_TRUE(old_process->wait_listening(Deadline{10s})) << old_process->stderr_text();

    UniqueFd client = connect_to(at, 5000ms);
    UniqueFd server = accept_one(upstream.fd(), Deadline{5s});
    ASSERT_TRUE(server);
    std::vector<std::byte> download(kDownload);
    for (std::size_t i = 0; i < download.size(); ++i) // a byte's place is in its value
        download[i] = static_cast<std::byte>((i * 13 + i / 4096) & 0xff);
    std::thread sender([&] { (void)send_all(server.get(), download, Deadline{60s}); });
    std::this_thread::sleep_for(300ms); // the client's buffers full, the engine's pipe too

    for (int upgrade = 1; upgrade <= 2; ++upgrade) {
        auto successor = std::make_unique<BinaryProcess>(uring_fwd_binary(), args);
        const bool took_over = successor->logs("stopped accepting and drains", Deadline{10s});
        const auto since = std::chrono::steady_clock::now();
        const std::optional<ExitStatus> old_status = old_process->wait_exit(Deadline{3s});
        ASSERT_TRUE(took_over) << successor->stderr_text() << old_process->stderr_text();
        ASSERT_TRUE(old_status) << "upgrade " << upgrade
                                << ": the old process still runs 3 s after the take-over:\n"
                                << old_process->stderr_text();
        EXPECT_TRUE(old_status->exited && old_status->code == 0) << old_status->describe();
        EXPECT_NE(old_process->stderr_text().find(
                      fmt::format("handed 1 connection over to process {}", successor->pid())),
                  std::string::npos)
            << old_process->stderr_text();
        std::printf("[ handover ] %s, upgrade %d with a client that reads nothing: the old "
                    "process exited %lld ms after the take-over\n",
                    data_path.c_str(), upgrade,
                    static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                               std::chrono::steady_clock::now() - since)
                                               .count()));
        old_process = std::move(successor);
    }

    std::vector<std::byte> got(kDownload);
    EXPECT_EQ(recv_all(client.get(), got, Deadline{30s}).status, IoStatus::Ok)
        << old_process->stderr_text();
    sender.join();
    EXPECT_TRUE(got == download) << "the download arrived changed";
    // And it goes on both ways through the last successor.
    const std::array<std::byte, 3> ping{std::byte{'a'}, std::byte{'b'}, std::byte{'c'}};
    std::array<std::byte, 3> echoed{};
    ASSERT_EQ(send_all(client.get(), ping, Deadline{5s}).status, IoStatus::Ok);
    ASSERT_EQ(recv_all(server.get(), echoed, Deadline{5s}).status, IoStatus::Ok);
    EXPECT_EQ(echoed, ping);
    ASSERT_EQ(send_all(server.get(), ping, Deadline{5s}).status, IoStatus::Ok);
    ASSERT_EQ(recv_all(client.get(), echoed, Deadline{5s}).status, IoStatus::Ok);
    EXPECT_EQ(echoed, ping);
}

TEST(ConnectionHandover, AClientThatReadsNothingIsHandedOverWithWhatItsPipeHolds) {
    check_a_stuck_download_is_handed_over("splice", "");
}

// On the copy path, with small buffers only (two of them fit in a pipe).
TEST(ConnectionHandover, ACopyingClientThatReadsNothingIsHandedOverWithItsChunksInAPipe) {
    check_a_stuck_download_is_handed_over("copy", "bulk_buffers = 0\n");
}

TEST(ConnectionHandover, HalfClosedConnectionsStayHalfClosed) {
    constexpr std::size_t kAfter = 64 * 1024;
    std::atomic<bool> go{false};
    std::atomic<uint64_t> b_received{0};
    std::string b_sha; // written by the handler before it returns, read after stop()
    std::mutex b_mu;
    ConnectionServer upstream(listen_loopback(Family::Inet4), [&](UniqueFd conn, int) {
        std::array<std::byte, 1> mode{};
        if (recv_all(conn.get(), mode, Deadline{10s}).status != IoStatus::Ok)
            return;
        if (mode[0] == std::byte{'A'}) { // the client FINs first, then we answer
            if (recv_until_eof(conn.get(), Deadline{20s}).status != IoStatus::Eof)
                return;
            const Deadline wait{20s};
            while (!go.load() && !wait.expired())
                std::this_thread::sleep_for(5ms);
            send_all(conn.get(), Payload(77).bytes(0, kAfter), Deadline{10s});
            return; // closing sends our FIN
        }
        // We FIN first, then read what the client still sends.
        send_all(conn.get(), Payload(88).bytes(0, 1024), Deadline{10s});
        ::shutdown(conn.get(), SHUT_WR);
        Sha256 sha;
        uint64_t n = 0;
        recv_until_eof(conn.get(), Deadline{20s}, [&](std::span<const std::byte> data) {
            sha.update(data);
            n += data.size();
        });
        std::lock_guard lock(b_mu);
        b_sha = sha.hex_digest();
        b_received.store(n);
    });
    TempDir dir;
    const Endpoint at{Endpoint::Kind::Inet, "127.0.0.1", free_port()};
    const ConfigFile file{
        upgrade_config(2, dir.path() + "/upgrade.sock", "half", at, upstream.endpoint())};
    const Upgrader upgrader{file.path()};
    auto old_process = std::make_unique<BinaryProcess>(uring_fwd_binary(), upgrader.args());
    ASSERT_TRUE(old_process->wait_listening(Deadline{10s})) << old_process->stderr_text();

    UniqueFd a = connect_to(at, 5000ms);
    ASSERT_EQ(send_text(a.get(), "A hello", Deadline{5s}).status, IoStatus::Ok);
    ::shutdown(a.get(), SHUT_WR);
    UniqueFd b = connect_to(at, 5000ms);
    ASSERT_EQ(send_text(b.get(), "B", Deadline{5s}).status, IoStatus::Ok);
    std::vector<std::byte> first(1024);
    ASSERT_EQ(recv_all(b.get(), first, Deadline{5s}).status, IoStatus::Ok);
    EXPECT_EQ(first, Payload(88).bytes(0, 1024));
    EXPECT_EQ(recv_until_eof(b.get(), Deadline{5s}).status, IoStatus::Eof);
    std::this_thread::sleep_for(100ms); // both FINs passed on

    BinaryProcess successor{uring_fwd_binary(), upgrader.args()};
    const std::optional<ExitStatus> old_status = old_process->wait_exit(Deadline{10s});
    ASSERT_TRUE(old_status) << old_process->stderr_text();
    EXPECT_NE(old_process->stderr_text().find("handed 2 connections over"), std::string::npos)
        << old_process->stderr_text() << successor.stderr_text();

    go.store(true);
    Sha256 a_sha;
    uint64_t a_received = 0;
    const IoResult a_end =
        recv_until_eof(a.get(), Deadline{10s}, [&](std::span<const std::byte> data) {
            a_sha.update(data);
            a_received += data.size();
        });
    EXPECT_EQ(a_end.status, IoStatus::Eof);
    EXPECT_EQ(a_received, kAfter);
    EXPECT_EQ(a_sha.hex_digest(), payload_sha256(77, kAfter));
    ASSERT_EQ(send_all(b.get(), Payload(99).bytes(0, kAfter), Deadline{10s}).status, IoStatus::Ok);
    ::shutdown(b.get(), SHUT_WR);
    ASSERT_TRUE(eventually([&] { return b_received.load() == kAfter; }, Deadline{10s}))
        << b_received.load();
    upstream.stop();
    EXPECT_EQ(b_sha, payload_sha256(99, kAfter));
}

// One message on the upgrade socket (SOCK_SEQPACKET), with the fds it carries.
std::string receive_message(int fd, std::vector<UniqueFd>& fds) {
    std::string buffer(256 * 1024, '\0');
    iovec iov{buffer.data(), buffer.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 253)];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10000) != 1)
        return {};
    const ssize_t n = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    if (n <= 0)
        return {};
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (std::size_t i = 0; i < count; ++i) {
            int passed = -1;
            std::memcpy(&passed, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            fds.emplace_back(passed);
        }
    }
    buffer.resize(static_cast<std::size_t>(n));
    return buffer;
}

// `count` clients of `at` exchanging 1000-byte rounds, each past its first round (a
// failed one is a failure of the test).
std::vector<std::unique_ptr<RoundTripper>> clients_after_a_round(const Endpoint& at, int count) {
    std::vector<std::unique_ptr<RoundTripper>> clients;
    for (int i = 0; i < count; ++i) {
        clients.push_back(std::make_unique<RoundTripper>(at, 300 + i, 1000));
        EXPECT_TRUE(clients.back()->round()) << clients.back()->failure;
    }
    return clients;
}

// Plays a successor over the upgrade socket's protocol (engine/cli/upgrade.hpp,
// connection_handover.hpp) up to the first batch of connections, which it takes and
// does not answer: the conversation, for the caller to close (the successor dying).
UniqueFd take_first_batch_unanswered(const std::string& upgrade_socket) {
    UniqueFd conversation(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, upgrade_socket.data(), upgrade_socket.size());
    EXPECT_EQ(
        ::connect(conversation.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)),
        0)
        << std::strerror(errno);
    auto say = [&](std::string_view text) {
        EXPECT_EQ(::send(conversation.get(), text.data(), text.size(), MSG_NOSIGNAL),
                  static_cast<ssize_t>(text.size()));
    };
    say("take-over");
    std::vector<UniqueFd> fds;
    std::string message;
    do {
        message = receive_message(conversation.get(), fds);
    } while (!message.empty() && !message.starts_with("end "));
    EXPECT_TRUE(message.ends_with(" connections")) << "the offer: '" << message << "'";
    say("accepting connections");
    EXPECT_EQ(receive_message(conversation.get(), fds), "released");
    fds.clear();
    const std::string batch = receive_message(conversation.get(), fds);
    EXPECT_TRUE(batch.starts_with(std::string("conns\0", 6))) << batch.substr(0, 16);
    EXPECT_GE(fds.size(), 2u);
    return conversation; // our copies of the sockets close here, unanswered
}

// The successor dies in the middle of the hand-over, after the old process sent it a
// batch and before it answered: here the test is that successor, speaking the upgrade
// socket's protocol (engine/cli/upgrade.hpp, connection_handover.hpp) until the first
// batch and then closing. The old process takes the batch back: every connection is
// still served by it, none reset, and it exits once they end.
TEST(ConnectionHandover, ASuccessorThatDiesBeforeItAnswersLeavesEveryConnectionServed) {
    EchoServer echo;
    TempDir dir;
    const std::string upgrade_socket = dir.path() + "/upgrade.sock";
    const Endpoint at{Endpoint::Kind::Inet, "127.0.0.1", free_port()};
    const ConfigFile file{upgrade_config(2, upgrade_socket, "db", at, echo.endpoint())};
    BinaryProcess old_process{
        uring_fwd_binary(),
        with_data_path_under_test(uring_fwd_binary(), {"--config", file.path()})};
    ASSERT_TRUE(old_process.wait_listening(Deadline{10s})) << old_process.stderr_text();
    std::vector<std::unique_ptr<RoundTripper>> clients = clients_after_a_round(at, 20);
    ASSERT_FALSE(::testing::Test::HasFailure());

    // Dies: its copies of the sockets and its end of the conversation close, unanswered.
    take_first_batch_unanswered(upgrade_socket).reset();

    EXPECT_TRUE(old_process.logs(" kept here", Deadline{10s})) << old_process.stderr_text();
    for (auto& client : clients) {
        for (int i = 0; i < 3; ++i)
            ASSERT_TRUE(client->round()) << client->failure << "\n" << old_process.stderr_text();
        EXPECT_TRUE(client->finish()) << client->failure;
    }
    const std::optional<ExitStatus> status = old_process.wait_exit(Deadline{10s});
    ASSERT_TRUE(status) << old_process.stderr_text();
    EXPECT_EQ(status->code, 0);
    EXPECT_NE(old_process.stderr_text().find("handed 0 connections over"), std::string::npos)
        << old_process.stderr_text();
}

// The successor holds the first batch past the old process's drain_timeout and then
// dies unanswered: the connections come back to shards whose drain has ended, and they
// end at once, as the drain said (closed as drain_timeout), rather than after a drain
// started anew (which the shard did before: the old process then exited a whole drain,
// 3 s, after the successor died).
TEST(ConnectionHandover, ConnectionsTakenBackAfterTheDrainEndedCloseAtOnce) {
    EchoServer echo;
    TempDir dir;
    const std::string upgrade_socket = dir.path() + "/upgrade.sock";
    const Endpoint at{Endpoint::Kind::Inet, "127.0.0.1", free_port()};
    const ConfigFile file{
        upgrade_config(2, upgrade_socket, "db", at, echo.endpoint(), "drain_timeout = \"3s\"\n")};
    BinaryProcess old_process{
        uring_fwd_binary(),
        with_data_path_under_test(uring_fwd_binary(), {"--config", file.path()})};
    ASSERT_TRUE(old_process.wait_listening(Deadline{10s})) << old_process.stderr_text();
    std::vector<std::unique_ptr<RoundTripper>> clients = clients_after_a_round(at, 20);
    ASSERT_FALSE(::testing::Test::HasFailure());
    UniqueFd conversation = take_first_batch_unanswered(upgrade_socket);
    std::this_thread::sleep_for(3500ms); // past the drain
    EXPECT_FALSE(old_process.wait_exit(Deadline{0ms})) << "it waits for the successor";
    conversation.reset(); // dies
    // It exits in about 0.1 s here (more under the sanitizers); a drain anew takes 3 s.
    const std::optional<ExitStatus> status = old_process.wait_exit(Deadline{2s});
    ASSERT_TRUE(status) << "the old process still runs:\n" << old_process.stderr_text();
    EXPECT_EQ(status->code, 0);
    for (auto& client : clients)
        EXPECT_FALSE(client->round()) << "served on past the drain";
}
// A successor that has no route of a connection's name refuses it: the old process
// takes it back and serves it to its end, and then exits.
TEST(ConnectionHandover, AConnectionTheSuccessorRefusesStaysWithTheOldProcess) {
    EchoServer echo;
    TempDir dir;
    const Endpoint at{Endpoint::Kind::Inet, "127.0.0.1", free_port()};
    const std::string upgrade_socket = dir.path() + "/upgrade.sock";
    const ConfigFile old_file{upgrade_config(2, upgrade_socket, "old", at, echo.endpoint()), "old"};
    const ConfigFile new_file{upgrade_config(2, upgrade_socket, "new", at, echo.endpoint()), "new"};
    BinaryProcess old_process{
        uring_fwd_binary(),
        with_data_path_under_test(uring_fwd_binary(), {"--config", old_file.path()})};
    ASSERT_TRUE(old_process.wait_listening(Deadline{10s})) << old_process.stderr_text();
    RoundTripper client(at, 7, 4096);
    ASSERT_TRUE(client.round()) << client.failure;

    BinaryProcess successor{
        uring_fwd_binary(),
        with_data_path_under_test(uring_fwd_binary(), {"--config", new_file.path()})};
    ASSERT_TRUE(successor.logs("a connection of route \"old\" is not taken over", Deadline{10s}))
        << old_process.stderr_text() << successor.stderr_text();
    for (int i = 0; i < 5; ++i)
        ASSERT_TRUE(client.round()) << client.failure << "\n" << old_process.stderr_text();
    EXPECT_TRUE(client.finish()) << client.failure;
    const std::optional<ExitStatus> status = old_process.wait_exit(Deadline{5s});
    ASSERT_TRUE(status) << old_process.stderr_text();
    EXPECT_EQ(status->code, 0);
    EXPECT_NE(old_process.stderr_text().find("handed 0 connections over to process " +
                                             std::to_string(successor.pid()) + " in"),
              std::string::npos)
        << old_process.stderr_text();
    EXPECT_NE(old_process.stderr_text().find("; 1 connection kept here"), std::string::npos)
        << old_process.stderr_text();
}

// A connection still in its inspect phase when the successor takes over (a client of
// an accept_proxy route that has not sent its PROXY header) is finished first: the old
// process keeps it, and waits for it, until it forwards; then it is handed over like
// any other, and the old process exits. Its bytes before and after arrive whole.
TEST(ConnectionHandover, AConnectionStillInspectingIsHandedOverOnceItForwards) {
    EchoServer echo;
    TempDir dir;
    const Endpoint at{Endpoint::Kind::Inet, "127.0.0.1", free_port()};
    const ConfigFile file{
        fmt::format("[engine]\nshards = 2\nupgrade_socket = \"{}\"\n[[route]]\nname = \"proxied\"\n"
                    "listen = \"{}\"\naccept_proxy = true\ninspect_timeout = \"20s\"\n"
                    "  [[route.upstream]]\n  address = \"{}\"\n",
                    dir.path() + "/upgrade.sock", at.to_string(), echo.endpoint().to_string())};
    const Upgrader upgrader{file.path()};
    auto old_process = std::make_unique<BinaryProcess>(uring_fwd_binary(), upgrader.args());
    ASSERT_TRUE(old_process->wait_listening(Deadline{10s})) << old_process->stderr_text();
    // `header` goes first, and is the engine's: the echo sends back `sent` alone.
    auto echo_round = [](int fd, const std::string& sent, const std::string& header = "") {
        std::string back(sent.size(), '\0');
        return send_text(fd, header + sent, Deadline{5s}).status == IoStatus::Ok &&
               recv_all(fd, std::as_writable_bytes(std::span(back)), Deadline{5s}).status ==
                   IoStatus::Ok &&
               back == sent;
    };
    const UniqueFd inspecting = connect_to(at);
    ASSERT_TRUE(inspecting);
    std::this_thread::sleep_for(100ms); // accepted, reading its header, before the take-over

    BinaryProcess successor{uring_fwd_binary(), upgrader.args()};
    ASSERT_TRUE(successor.logs("stopped accepting and drains", Deadline{10s}))
        << successor.stderr_text() << old_process->stderr_text();
    std::this_thread::sleep_for(300ms);
    EXPECT_FALSE(old_process->wait_exit(Deadline{0ms}))
        << "the old process left a connection that had not sent its header";

    ASSERT_TRUE(echo_round(inspecting.get(), std::string(3000, 'h'),
                           "PROXY TCP4 192.0.2.7 192.0.2.8 4000 443\r\n"))
        << old_process->stderr_text() << successor.stderr_text();
    const std::optional<ExitStatus> status = old_process->wait_exit(Deadline{5s});
    ASSERT_TRUE(status) << "it still runs once the connection forwards:\n"
                        << old_process->stderr_text();
    EXPECT_EQ(status->code, 0);
    EXPECT_NE(old_process->stderr_text().find(
                  fmt::format("handed 1 connection over to process {}", successor.pid())),
              std::string::npos)
        << old_process->stderr_text();
    // Served by the successor now.
    ASSERT_TRUE(echo_round(inspecting.get(), std::string(5000, 'a'))) << successor.stderr_text();
    ASSERT_EQ(::shutdown(inspecting.get(), SHUT_WR), 0);
    EXPECT_EQ(recv_until_eof(inspecting.get(), Deadline{5s}).status, IoStatus::Eof);
}

// handover = "listeners": the old way, the old process drains what it has.
TEST(ConnectionHandover, ListenersOnlyLeavesTheConnectionsToDrain) {
    EchoServer echo;
    TempDir dir;
    const Endpoint at{Endpoint::Kind::Inet, "127.0.0.1", free_port()};
    const ConfigFile file{upgrade_config(1, dir.path() + "/upgrade.sock", "db", at, echo.endpoint(),
                                         "handover = \"listeners\"\n")};
    BinaryProcess old_process{uring_fwd_binary(), {"--config", file.path()}};
    ASSERT_TRUE(old_process.wait_listening(Deadline{10s})) << old_process.stderr_text();
    RoundTripper client(at, 9, 4096);
    ASSERT_TRUE(client.round()) << client.failure;
    BinaryProcess successor{uring_fwd_binary(), {"--config", file.path()}};
    ASSERT_TRUE(old_process.logs("accepts now; draining", Deadline{10s}))
        << old_process.stderr_text();
    std::this_thread::sleep_for(200ms);
    EXPECT_FALSE(old_process.wait_exit(Deadline{0ms})) << "it drains the connection";
    ASSERT_TRUE(client.round()) << client.failure;
    EXPECT_TRUE(client.finish()) << client.failure;
    EXPECT_TRUE(old_process.wait_exit(Deadline{5s})) << old_process.stderr_text();
}

} // namespace
} // namespace uringfwd::test
