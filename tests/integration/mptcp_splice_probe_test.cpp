// What splice does with MPTCP sockets (IPPROTO_MPTCP) on the running kernel, written as
// assertions (docs/kernel.md §12): a kernel that changes it fails here before an MPTCP
// route is served the wrong way.
//
// - splice(2) from an MPTCP socket into a pipe and from a pipe into an MPTCP socket
//   both move the bytes, and so does IORING_OP_SPLICE. Source: net/mptcp/protocol.c
//   mptcp_stream_ops has .splice_read = mptcp_splice_read (on .read_sock =
//   mptcp_read_sock) in 6.18; into the socket, fs/splice.c splice_to_socket() hands the
//   pages to sock_sendmsg(), which is mptcp_sendmsg for this socket.
// - Accepted from an MPTCP listener by an MPTCP client, the socket really is MPTCP
//   (SO_PROTOCOL = IPPROTO_MPTCP); a plain TCP client on the same listener gets a TCP
//   socket (net/mptcp/protocol.c mptcp_stream_accept: a fallen-back subflow is handed
//   over with inet_stream_ops).
#include "uring/ring.hpp"

#include "tests/support/unique_fd.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#ifndef IPPROTO_MPTCP
#define IPPROTO_MPTCP 262
#endif

namespace {

using uringfwd::test::UniqueFd;
using uringfwd::uring::Ring;

constexpr unsigned kLen = 10000;

bool mptcp_enabled() {
    std::ifstream in("/proc/sys/net/mptcp/enabled");
    int on = 0;
    return in >> on && on == 1;
}

struct MptcpPair {
    UniqueFd listener;
    UniqueFd client;
    UniqueFd accepted;
};

// Blocking sockets on 127.0.0.1: an MPTCP listener and a client of protocol
// `client_protocol` (IPPROTO_MPTCP or 0 for TCP), connected.
MptcpPair connect_pair(int client_protocol) {
    MptcpPair p;
    p.listener = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_MPTCP));
    EXPECT_TRUE(p.listener.valid()) << std::strerror(errno);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    EXPECT_EQ(::bind(p.listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(::listen(p.listener.get(), 4), 0);
    EXPECT_EQ(::getsockname(p.listener.get(), reinterpret_cast<sockaddr*>(&a), &len), 0);
    p.client = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, client_protocol));
    EXPECT_EQ(::connect(p.client.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0)
        << std::strerror(errno);
    p.accepted = UniqueFd(::accept4(p.listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    EXPECT_TRUE(p.accepted.valid()) << std::strerror(errno);
    return p;
}

int protocol_of(int fd) {
    int v = -1;
    socklen_t len = sizeof(v);
    ::getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &v, &len);
    return v;
}

struct Pipe {
    UniqueFd read, write;
};
Pipe make_pipe() {
    int fds[2];
    EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

// Reads exactly `n` bytes (blocking); returns what came.
std::vector<char> read_n(int fd, std::size_t n) {
    std::vector<char> out(n);
    std::size_t got = 0;
    while (got < n) {
        ssize_t r = ::recv(fd, out.data() + got, n - got, 0);
        if (r <= 0)
            break;
        got += static_cast<std::size_t>(r);
    }
    out.resize(got);
    return out;
}

class MptcpSpliceProbe : public ::testing::Test {
protected:
    void SetUp() override {
        if (!mptcp_enabled())
            GTEST_SKIP() << "net.mptcp.enabled is not 1 on this kernel";
    }
};

TEST_F(MptcpSpliceProbe, AcceptedSocketIsMptcpForAnMptcpClientAndTcpForAPlainOne) {
    MptcpPair mp = connect_pair(IPPROTO_MPTCP);
    EXPECT_EQ(protocol_of(mp.client.get()), IPPROTO_MPTCP);
    EXPECT_EQ(protocol_of(mp.accepted.get()), IPPROTO_MPTCP);
    MptcpPair tcp = connect_pair(0);
    EXPECT_EQ(protocol_of(tcp.accepted.get()), IPPROTO_TCP);
}

TEST_F(MptcpSpliceProbe, SpliceSyscallMovesBytesBothWays) {
    MptcpPair p = connect_pair(IPPROTO_MPTCP);
    Pipe pipe = make_pipe();
    const std::vector<char> sent(kLen, 'm');
    ASSERT_EQ(::send(p.client.get(), sent.data(), sent.size(), 0), static_cast<ssize_t>(kLen));
    std::size_t in = 0;
    while (in < kLen) {
        ssize_t r = ::splice(p.accepted.get(), nullptr, pipe.write.get(), nullptr, kLen - in, 0);
        ASSERT_GT(r, 0) << "splice from an MPTCP socket: " << std::strerror(errno);
        in += static_cast<std::size_t>(r);
    }
    std::size_t out = 0;
    while (out < kLen) {
        ssize_t r = ::splice(pipe.read.get(), nullptr, p.accepted.get(), nullptr, kLen - out, 0);
        ASSERT_GT(r, 0) << "splice into an MPTCP socket: " << std::strerror(errno);
        out += static_cast<std::size_t>(r);
    }
    EXPECT_EQ(read_n(p.client.get(), kLen), sent);
}

TEST_F(MptcpSpliceProbe, RingSpliceMovesBytesBothWays) {
    MptcpPair p = connect_pair(IPPROTO_MPTCP);
    Pipe pipe = make_pipe();
    const std::vector<char> sent(kLen, 'r');
    ASSERT_EQ(::send(p.client.get(), sent.data(), sent.size(), 0), static_cast<ssize_t>(kLen));
    Ring ring(8);
    auto one = [&ring](uint64_t tag) {
        for (;;)
            for (const auto& c : ring.submit_and_wait(1))
                if (c.user_data == tag)
                    return c.result;
    };
    int in = 0;
    while (in < static_cast<int>(kLen)) {
        ring.splice(p.accepted.get(), pipe.write.get(), kLen - in, 0, 1);
        int r = one(1);
        ASSERT_GT(r, 0) << "IORING_OP_SPLICE from an MPTCP socket: " << std::strerror(-r);
        in += r;
    }
    int out = 0;
    while (out < static_cast<int>(kLen)) {
        ring.splice(pipe.read.get(), p.accepted.get(), kLen - out, 0, 2);
        int r = one(2);
        ASSERT_GT(r, 0) << "IORING_OP_SPLICE into an MPTCP socket: " << std::strerror(-r);
        out += r;
    }
    EXPECT_EQ(read_n(p.client.get(), kLen), sent);
}

} // namespace
