// PROXY protocol against real implementations from Debian, started by the tests:
//  - HAProxy (send-proxy, send-proxy-v2) in front of uring-fwd with accept_proxy: the
//    client address uring-fwd's observer reports is the real client's, the stream intact;
//  - uring-fwd with send_proxy v1/v2 in front of HAProxy (accept-proxy, logging
//    %ci:%cp) and of nginx (stream, listen ... proxy_protocol, $proxy_protocol_addr):
//    they see the real client address and port.
// A test skips only when its peer's binary is not installed.
#include "tests/support/binary_process.hpp"
#include "tests/support/echo_server.hpp"
#include "tests/support/exchange.hpp"
#include "tests/support/proc_stats.hpp"
#include "tests/support/proxy_under_test.hpp"
#include "tests/support/recording_observer.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/transfer_checks.hpp"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

constexpr const char* kHaproxy = "/usr/sbin/haproxy";
constexpr const char* kNginx = "/usr/sbin/nginx";
constexpr const char* kNginxStream = "/usr/lib/nginx/modules/ngx_stream_module.so";

bool installed(const char* path) {
    return ::access(path, X_OK) == 0 || ::access(path, R_OK) == 0;
}

uint16_t local_port(int fd) {
    sockaddr_in a{};
    socklen_t n = sizeof(a);
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
    return ntohs(a.sin_port);
}

Endpoint loopback(uint16_t port) {
    return Endpoint::parse("127.0.0.1:" + std::to_string(port));
}

// A scratch directory for one peer's files, removed afterwards.
class ScratchDir {
public:
    explicit ScratchDir(const std::string& tag)
        : path_(::testing::TempDir() + "uring-fwd-interop-" + tag + "-" +
                std::to_string(::getpid())) {
        std::filesystem::remove_all(path_);
        std::filesystem::create_directories(path_);
    }
    ~ScratchDir() { std::filesystem::remove_all(path_); }
    std::string file(const std::string& name, const std::string& text) const {
        std::string p = path_ + "/" + name;
        std::ofstream(p) << text;
        return p;
    }
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

// Waits until something accepts on `port`.
bool wait_listening(uint16_t port, const BinaryProcess& peer) {
    return eventually(
               [&] {
                   UniqueFd probe;
                   return try_connect(loopback(port), 200ms, probe) == 0;
               },
               Deadline{10s}) ||
           (ADD_FAILURE() << "peer never listened: " << peer.stderr_text() << peer.stdout_text(),
            false);
}

std::unique_ptr<BinaryProcess> start_haproxy(const ScratchDir& dir, const std::string& body,
                                             uint16_t port) {
    std::string config = "global\n"
                         "  log stdout format raw local0 info\n"
                         "defaults\n"
                         "  mode tcp\n"
                         "  log global\n"
                         "  timeout connect 2s\n"
                         "  timeout client 10s\n"
                         "  timeout server 10s\n" +
                         body;
    std::string path = dir.file("haproxy.cfg", config);
    auto peer =
        std::make_unique<BinaryProcess>(kHaproxy, std::vector<std::string>{"-db", "-f", path});
    if (!wait_listening(port, *peer))
        return nullptr;
    return peer;
}

TEST(ProxyProtocolInterop, HaproxySendsAndUringFwdAcceptsTheRealClient) {
    if (!installed(kHaproxy))
        GTEST_SKIP() << kHaproxy << " is not installed (Debian package haproxy)";
    for (const char* option : {"send-proxy", "send-proxy-v2"}) {
        SCOPED_TRACE(option);
        Listener upstream = listen_loopback(Family::Inet4);
        RouteConfig r;
        r.name = "pp";
        r.listen = {loopback_any_port()};
        r.pool.members = {UpstreamMember{upstream.endpoint()}};
        r.accept_proxy = true;
        r.trusted_sources = {"127.0.0.0/8"};
        auto recorder = std::make_shared<RecordingObserver>();
        ProxyUnderTest proxy{{r}, [&](EngineConfig& c) { c.observer = recorder; }};

        ScratchDir dir(option);
        uint16_t port = free_port();
        auto haproxy =
            start_haproxy(dir,
                          "frontend fe\n  bind 127.0.0.1:" + std::to_string(port) +
                              "\n  default_backend be\n"
                              "backend be\n  server u 127.0.0.1:" +
                              std::to_string(proxy.endpoint().port) + " " + option + "\n",
                          port);
        ASSERT_TRUE(haproxy);
        UniqueFd client = connect_to(loopback(port));
        const std::string expected_client = "127.0.0.1:" + std::to_string(local_port(client.get()));
        std::string payload(200 * 1024, 'x');
        for (std::size_t i = 0; i < payload.size(); ++i)
            payload[i] = static_cast<char>('a' + i % 26);
        std::thread writer([&] {
            send_text(client.get(), payload, Deadline{10s});
            shutdown_write(client.get());
        });
        // The readiness probe may have come through first, empty: skip such connections.
        std::string got;
        for (int tries = 0; tries < 4 && got.empty(); ++tries) {
            UniqueFd in = accept_one(upstream.fd(), Deadline{10s});
            recv_until_eof(in.get(), Deadline{10s}, [&](std::span<const std::byte> chunk) {
                got.append(reinterpret_cast<const char*>(chunk.data()), chunk.size());
            });
        }
        writer.join();
        EXPECT_TRUE(got == payload) << "stream damaged: " << got.size() << " bytes";
        // The readiness probe passed through too; this client must be among them.
        auto seen = [&] {
            const std::vector<ConnectionInfo> all = recorder->opened_connections();
            return std::any_of(all.begin(), all.end(), [&](const ConnectionInfo& c) {
                return c.client.to_string() == expected_client;
            });
        };
        EXPECT_TRUE(eventually(seen, Deadline{5s})) << "wanted " << expected_client;
    }
}

TEST(ProxyProtocolInterop, UringFwdSendsAndHaproxyLogsTheRealClient) {
    if (!installed(kHaproxy))
        GTEST_SKIP() << kHaproxy << " is not installed (Debian package haproxy)";
    for (ProxyVersion version : {ProxyVersion::V1, ProxyVersion::V2}) {
        SCOPED_TRACE(std::string(to_string(version)));
        EchoServer echo;
        ScratchDir dir(std::string("accept-") + std::string(to_string(version)));
        uint16_t port = free_port();
        auto haproxy = start_haproxy(dir,
                                     "frontend fe\n  bind 127.0.0.1:" + std::to_string(port) +
                                         " accept-proxy\n  log-format \"client=%ci:%cp\"\n"
                                         "  default_backend be\n"
                                         "backend be\n  server e " +
                                         echo.endpoint().to_string() + "\n",
                                     port);
        ASSERT_TRUE(haproxy);
        RouteConfig r;
        r.name = "pp";
        r.listen = {loopback_any_port()};
        r.pool.members = {UpstreamMember{loopback(port)}};
        r.send_proxy = version;
        ProxyUnderTest proxy{{r}};
        UniqueFd client = connect_to(proxy.endpoint());
        const std::string expected = "client=127.0.0.1:" + std::to_string(local_port(client.get()));
        ExchangePlan plan;
        plan.send_bytes = 256 * 1024;
        plan.send_seed = 31;
        const ExchangeResult result = exchange(client, plan, Deadline{10s});
        EXPECT_TRUE(ReceivedPayload(result, 31, 256 * 1024)) << result.describe();
        // HAProxy logs a TCP session when it ends.
        EXPECT_TRUE(
            eventually([&] { return haproxy->stdout_text().find(expected) != std::string::npos; },
                       Deadline{5s}))
            << "wanted " << expected << " in: " << haproxy->stdout_text();
    }
}

TEST(ProxyProtocolInterop, UringFwdSendsAndNginxStreamSeesTheRealClient) {
    if (!installed(kNginx) || !installed(kNginxStream))
        GTEST_SKIP() << "nginx with its stream module is not installed (Debian packages nginx, "
                        "libnginx-mod-stream)";
    for (ProxyVersion version : {ProxyVersion::V1, ProxyVersion::V2}) {
        SCOPED_TRACE(std::string(to_string(version)));
        ScratchDir dir(std::string("nginx-") + std::string(to_string(version)));
        uint16_t port = free_port();
        // fmt::format, not a chain of operator+ (see tests/pch/tests_pch.hpp).
        const std::string config =
            fmt::format("load_module {};\n"
                        "daemon off;\nmaster_process off;\n"
                        "pid {}/nginx.pid;\n"
                        "error_log {}/error.log info;\n"
                        "events {{ worker_connections 64; }}\n"
                        "stream {{\n  server {{\n    listen 127.0.0.1:{} proxy_protocol;\n"
                        "    return \"$proxy_protocol_addr:$proxy_protocol_port\\n\";\n"
                        "  }}\n}}\n",
                        kNginxStream, dir.path(), dir.path(), port);
        std::string path = dir.file("nginx.conf", config);
        BinaryProcess nginx(kNginx,
                            {"-p", dir.path(), "-e", dir.path() + "/error.log", "-c", path});
        ASSERT_TRUE(wait_listening(port, nginx));
        RouteConfig r;
        r.name = "pp";
        r.listen = {loopback_any_port()};
        r.pool.members = {UpstreamMember{loopback(port)}};
        r.send_proxy = version;
        ProxyUnderTest proxy{{r}};
        UniqueFd client = connect_to(proxy.endpoint());
        const std::string expected = "127.0.0.1:" + std::to_string(local_port(client.get())) + "\n";
        std::string got;
        recv_until_eof(client.get(), Deadline{10s}, [&](std::span<const std::byte> chunk) {
            got.append(reinterpret_cast<const char*>(chunk.data()), chunk.size());
        });
        EXPECT_EQ(got, expected);
    }
}

} // namespace
} // namespace uringfwd::test
