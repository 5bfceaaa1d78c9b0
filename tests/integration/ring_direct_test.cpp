// uring/: the registered (direct) file table over real sockets. An accept into a slot
// the kernel picks brings the peer's address; send, splice (SPLICE_F_FD_IN_FIXED for the
// input, IOSQE_FIXED_FILE for the output), setsockopt through IORING_OP_URING_CMD, an fd
// installed for a half-close and close-direct all name the slot; a full table answers
// -ENFILE (docs/kernel.md §11).
#include "uring/ring.hpp"

#include "tests/support/deadline.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/unique_fd.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <span>
#include <string>

namespace {

using namespace std::chrono_literals;
using uringfwd::test::connect_to;
using uringfwd::test::Deadline;
using uringfwd::test::Family;
using uringfwd::test::IoStatus;
using uringfwd::test::listen_loopback;
using uringfwd::test::UniqueFd;
using uringfwd::uring::Completion;
using uringfwd::uring::FileRef;
using uringfwd::uring::Link;
using uringfwd::uring::Ring;

// The result of the operation tagged `tag`, waiting for it (and keeping the others).
int result_of(Ring& ring, std::map<uint64_t, int>& seen, uint64_t tag) {
    for (int round = 0; round < 100 && !seen.contains(tag); ++round)
        for (const Completion& c : ring.submit_and_wait(1))
            seen[c.user_data] = c.result;
    return seen.at(tag);
}

std::string read_some(int fd, std::size_t n) {
    std::string out(n, '\0');
    std::span<std::byte> span{reinterpret_cast<std::byte*>(out.data()), n};
    EXPECT_EQ(uringfwd::test::recv_all(fd, span, Deadline{5s}).status, IoStatus::Ok);
    return out;
}

// Registers a table and checks this kernel has every piece, or skips.
#define REGISTER_OR_SKIP(ring, slots)                                                              \
    ASSERT_EQ((ring).register_file_table(slots), 0);                                               \
    if (std::string missing = (ring).probe_direct(); !missing.empty())                             \
    GTEST_SKIP() << missing

TEST(RingDirect, AcceptedSlotCarriesSendSpliceSetsockoptHalfCloseAndClose) {
    Ring ring(64);
    REGISTER_OR_SKIP(ring, 8);
    std::map<uint64_t, int> seen;
    auto listener = listen_loopback(Family::Inet4);
    UniqueFd client = connect_to(listener.endpoint());

    sockaddr_in peer{};
    socklen_t peer_len = sizeof(peer);
    ring.accept_direct(FileRef::plain(listener.fd()), reinterpret_cast<sockaddr*>(&peer), &peer_len,
                       1);
    const int slot = result_of(ring, seen, 1);
    ASSERT_GE(slot, 0);
    sockaddr_in mine{};
    socklen_t mine_len = sizeof(mine);
    ASSERT_EQ(::getsockname(client.get(), reinterpret_cast<sockaddr*>(&mine), &mine_len), 0);
    EXPECT_EQ(peer.sin_port, mine.sin_port) << "the accept wrote the client's address";
    const FileRef accepted = FileRef::direct(slot);

    ring.send(accepted, "hi", 2, 0, 2);
    EXPECT_EQ(result_of(ring, seen, 2), 2);
    EXPECT_EQ(read_some(client.get(), 2), "hi");

    int pipe_fds[2];
    ASSERT_EQ(::pipe(pipe_fds), 0);
    UniqueFd pipe_read{pipe_fds[0]};
    UniqueFd pipe_write{pipe_fds[1]};
    ASSERT_EQ(::send(client.get(), "abc", 3, 0), 3);
    ring.splice(accepted, FileRef::plain(pipe_write.get()), 3, 0, 3); // slot -> pipe
    EXPECT_EQ(result_of(ring, seen, 3), 3);
    char buf[8] = {};
    ASSERT_EQ(::read(pipe_read.get(), buf, sizeof(buf)), 3);
    EXPECT_EQ(std::string(buf, 3), "abc");
    ASSERT_EQ(::write(pipe_write.get(), "xyz", 3), 3);
    ring.splice(FileRef::plain(pipe_read.get()), accepted, 3, 0, 4); // pipe -> slot
    EXPECT_EQ(result_of(ring, seen, 4), 3);
    EXPECT_EQ(read_some(client.get(), 3), "xyz");

    ring.install_fd(static_cast<unsigned>(slot), 5);
    const int installed = result_of(ring, seen, 5);
    ASSERT_GE(installed, 0);
    EXPECT_EQ(::shutdown(installed, SHUT_WR), 0);
    ::close(installed); // the slot keeps the socket
    char byte = 0;
    EXPECT_EQ(::recv(client.get(), &byte, 1, 0), 0) << "FIN through the installed fd";
    ring.send(accepted, "!", 1, MSG_NOSIGNAL, 6);
    EXPECT_EQ(result_of(ring, seen, 6), -EPIPE) << "the slot's socket is shut for writing";

    static const linger kReset{1, 0};
    ring.setsockopt(accepted, SOL_SOCKET, SO_LINGER, &kReset, sizeof(kReset), 7, Link::Hard);
    ring.close_direct(static_cast<unsigned>(slot), 8);
    EXPECT_EQ(result_of(ring, seen, 7), 0);
    EXPECT_EQ(result_of(ring, seen, 8), 0);
    // The slot's close drops the ring's reference; the socket's own close (and with it
    // the reset) may come a moment later, from the file's last fput, which the kernel
    // can defer (fs/file_table.c fput: task work, or delayed_fput from a worker). Wait
    // for it: the client, which had our FIN (CLOSE_WAIT), gets POLLERR only from a reset
    // (an orderly close leaves it readable at EOF and nothing more). A reset there sets
    // EPIPE rather than ECONNRESET (net/ipv4/tcp_input.c tcp_reset()), and the send
    // fails (after an orderly close it would succeed).
    // The ring lets go of the slot's file only once the requests that used it are
    // freed, which it may leave to its next entry: enter it (a 100 ms timeout) while
    // waiting. Waiting in poll(2) alone failed once in a full suite run, no reset in 2 s.
    pollfd watch{client.get(), POLLERR, 0};
    int ready = 0;
    for (uint64_t round = 0; round < 20 && ready == 0; ++round) {
        ring.timeout(std::chrono::milliseconds{100}, 100 + round);
        (void)result_of(ring, seen, 100 + round);
        ready = ::poll(&watch, 1, 0);
    }
    EXPECT_EQ(ready, 1) << "no reset within 2 s";
    EXPECT_TRUE(watch.revents & POLLERR) << watch.revents;
    errno = 0;
    EXPECT_EQ(::send(client.get(), "q", 1, MSG_NOSIGNAL), -1);
    EXPECT_TRUE(errno == EPIPE || errno == ECONNRESET)
        << "SO_LINGER {1, 0} set through the ring: " << std::strerror(errno);
    ring.close_direct(static_cast<unsigned>(slot), 9);
    EXPECT_EQ(result_of(ring, seen, 9), -EBADF) << "the slot is free again";
}

TEST(RingDirect, AFullTableAnswersEnfile) {
    Ring ring(16);
    REGISTER_OR_SKIP(ring, 1);
    std::map<uint64_t, int> seen;
    ring.socket_direct(AF_INET, SOCK_STREAM, 0, 1);
    const int slot = result_of(ring, seen, 1);
    EXPECT_EQ(slot, 0);
    ring.socket_direct(AF_INET, SOCK_STREAM, 0, 2);
    EXPECT_EQ(result_of(ring, seen, 2), -ENFILE);
    ring.close_direct(static_cast<unsigned>(slot), 3);
    EXPECT_EQ(result_of(ring, seen, 3), 0);
    ring.socket_direct(AF_INET, SOCK_STREAM, 0, 4);
    EXPECT_EQ(result_of(ring, seen, 4), 0) << "a closed slot is picked again";
}

TEST(RingDirect, ATableLargerThanTheFdLimitIsRefused) {
    Ring ring(16);
    rlimit lim{};
    ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &lim), 0);
    if (lim.rlim_cur >= (1u << 20))
        GTEST_SKIP() << "the soft fd limit is at IORING_MAX_FIXED_FILES";
    EXPECT_EQ(ring.register_file_table(static_cast<unsigned>(lim.rlim_cur) + 1), -EMFILE);
    EXPECT_EQ(ring.register_file_table(static_cast<unsigned>(lim.rlim_cur)), 0);
}

} // namespace
