// fastopen = true over real links (README "TCP Fast Open"): in namespaces of the test's
// own, with net.ipv4.tcp_fastopen = 3 (client and server) there, a client with a cookie
// sends its first bytes in the SYN to the route's listener, and the engine's connects to
// a member with fastopen carry the client's bytes in theirs. Proved by the kernel's own
// counters of each namespace (TcpExt TCPFastOpenPassive / TCPFastOpenActive), which start
// at 0 in a new namespace; a route without fastopen in the same setup counts none.
#include "tests/hardening/netns_binary.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/temp_config_file.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <span>
#include <sstream>
#include <string>
#include <thread>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

constexpr int kConnections = 4; // the first fetches the cookie, the others use it

// The TcpExt counters of `ns` (/proc/net/netstat read inside it: a header line of names,
// then a line of values).
std::map<std::string, uint64_t> tcp_ext(const std::string& ns) {
    const CommandResult r = run_command({"ip", "netns", "exec", ns, "cat", "/proc/net/netstat"});
    std::map<std::string, uint64_t> out;
    std::istringstream lines(r.output);
    std::string names;
    std::string values;
    while (std::getline(lines, names) && std::getline(lines, values)) {
        if (names.rfind("TcpExt:", 0) != 0)
            continue;
        std::istringstream n(names.substr(7));
        std::istringstream v(values.substr(7));
        std::string name;
        uint64_t value = 0;
        while (n >> name && v >> value)
            out[name] = value;
    }
    return out;
}

// An upstream in `ns` that answers each connection's "ping" with "pong"; TCP_FASTOPEN
// on its listener, so the engine's connects can carry data.
class PongServer {
public:
    PongServer(const std::string& ns, const Endpoint& where)
        : listener_(listen_in(ns, where)), thread_([this] { serve(); }) {}
    ~PongServer() { thread_.join(); }
    const Endpoint& endpoint() const { return listener_.endpoint(); }

private:
    void serve() {
        const int queue = 16;
        ::setsockopt(listener_.fd(), IPPROTO_TCP, TCP_FASTOPEN, &queue, sizeof(queue));
        for (int i = 0; i < kConnections; ++i) {
            try {
                UniqueFd c = accept_one(listener_.fd(), Deadline{10s});
                char buf[4];
                if (recv_all(c.get(), std::as_writable_bytes(std::span(buf)), Deadline{5s})
                        .status == IoStatus::Ok)
                    send_text(c.get(), "pong", Deadline{5s});
            } catch (const std::exception&) {
                return; // the test's own assertions say what went wrong
            }
        }
    }
    Listener listener_;
    std::thread thread_;
};

// One client exchange from `ns` with TCP_FASTOPEN_CONNECT: "ping" out, "pong" back.
std::string ping_from(const std::string& ns, const Endpoint& proxy) {
    NetnsEnter inside{ns};
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    const int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_FASTOPEN_CONNECT, &one, sizeof(one));
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(proxy.port);
    ::inet_pton(AF_INET, proxy.host.c_str(), &to.sin_addr);
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0)
        return fmt::format("connect: {}", std::strerror(errno));
    // With a cookie the connect returned at once: this write sends the SYN with it.
    if (send_text(fd.get(), "ping", Deadline{5s}).status != IoStatus::Ok)
        return "send failed";
    char buf[4];
    const IoResult r = recv_all(fd.get(), std::as_writable_bytes(std::span(buf)), Deadline{5s});
    return r.status == IoStatus::Ok ? std::string(buf, sizeof(buf)) : to_string(r.status);
}

class NetnsFastOpen : public ::testing::Test {
protected:
    void SetUp() override {
        if (const auto& why = NetnsTopology::unavailable_reason(); !why.empty())
            GTEST_SKIP() << "network namespaces unavailable: " << why;
    }

    // Runs kConnections exchanges through a route with `fastopen` on its listener and its
    // member, and returns the counters of the three namespaces after them.
    struct Counts {
        uint64_t client_active = 0;
        uint64_t proxy_passive = 0;
        uint64_t proxy_active = 0;
        uint64_t upstream_passive = 0;
    };
    Counts run(bool fastopen) {
        NetnsTopology net;
        for (const std::string& ns : {net.client_ns(), net.proxy_ns(), net.upstream_ns()})
            net.exec_in(ns, {"sysctl", "-qw", "net.ipv4.tcp_fastopen=3"});
        PongServer upstream(net.upstream_ns(),
                            Endpoint{Endpoint::Kind::Inet, NetnsTopology::kUpstream4, 0});
        ConfigFile file(fmt::format("[[route]]\nname = \"tfo\"\nlisten = \"{}:0\"\n"
                                    "fastopen = {}\n"
                                    "  [[route.upstream]]\n  address = \"{}\"\n"
                                    "  fastopen = {}\n",
                                    NetnsTopology::kProxyClientSide4, fastopen,
                                    upstream.endpoint().to_string(), fastopen));
        RunningBinary proxy = start_binary_with_config_in(net.proxy_ns(), file.path());
        for (int i = 0; i < kConnections; ++i)
            EXPECT_EQ(ping_from(net.client_ns(), proxy.endpoint), "pong") << "connection " << i;
        Counts c;
        c.client_active = tcp_ext(net.client_ns())["TCPFastOpenActive"];
        c.proxy_passive = tcp_ext(net.proxy_ns())["TCPFastOpenPassive"];
        c.proxy_active = tcp_ext(net.proxy_ns())["TCPFastOpenActive"];
        c.upstream_passive = tcp_ext(net.upstream_ns())["TCPFastOpenPassive"];
        return c;
    }
};

TEST_F(NetnsFastOpen, ClientsAndMemberConnectsSendTheirFirstBytesInTheSyn) {
    const Counts on = run(true);
    // Every connection after the first has the cookie the first one fetched.
    EXPECT_GE(on.client_active, 1u) << "the client never sent data in a SYN";
    EXPECT_GE(on.proxy_passive, 1u) << "the route's listener took no data in a SYN";
    EXPECT_GE(on.proxy_active, 1u) << "the engine's connects to the member sent no data in a SYN";
    EXPECT_GE(on.upstream_passive, 1u) << "the member took no data in a SYN";
}

TEST_F(NetnsFastOpen, WithoutItNeitherSideUsesIt) {
    const Counts off = run(false);
    EXPECT_EQ(off.proxy_passive, 0u);
    EXPECT_EQ(off.proxy_active, 0u);
    EXPECT_EQ(off.upstream_passive, 0u);
}

} // namespace
} // namespace uringfwd::test
