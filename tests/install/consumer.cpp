// An embedding application in miniature, built by scripts/check-install.sh against the
// installed liburingfwd only (pkg-config, or dependency('uringfwd') from a parent meson
// project). It proves the installed headers and library are enough: a configuration file
// parsed (the config library and toml++), an Engine started on 127.0.0.1:0 in front of an
// upstream this program listens on, a few bytes each way through it, a clean stop.
// Plain POSIX sockets, every wait bounded, so it fails instead of hanging.
#include <uringfwd/config_file.hpp>
#include <uringfwd/engine.hpp>
#include <uringfwd/version.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

namespace {

[[noreturn]] void fail(const std::string& what) {
    std::fprintf(stderr, "consumer: FAIL: %s\n", what.c_str());
    std::exit(1);
}

void check(bool ok, const char* what) {
    if (!ok) {
        fail(std::string(what) + ": " + std::strerror(errno));
    }
}

// A socket whose every receive and send gives up after 5 s.
int tcp_socket() {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    check(fd >= 0, "socket");
    timeval limit{5, 0};
    check(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit) == 0, "SO_RCVTIMEO");
    check(setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit) == 0, "SO_SNDTIMEO");
    return fd;
}

sockaddr_in loopback(uint16_t port) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return addr;
}

void send_all(int fd, std::string_view data) {
    while (!data.empty()) {
        ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
        check(n > 0, "send");
        data.remove_prefix(static_cast<size_t>(n));
    }
}

std::string receive_exactly(int fd, size_t size) {
    std::string data(size, '\0');
    size_t got = 0;
    while (got < size) {
        ssize_t n = recv(fd, data.data() + got, size - got, 0);
        if (n == 0) {
            fail("connection closed after " + std::to_string(got) + " of " +
                 std::to_string(size) + " bytes");
        }
        check(n > 0, "recv");
        got += static_cast<size_t>(n);
    }
    return data;
}

} // namespace

int main() {
    // What the README asks of an embedding process.
    signal(SIGPIPE, SIG_IGN);

    // The upstream: a listener on an ephemeral loopback port.
    int upstream = tcp_socket();
    sockaddr_in addr = loopback(0);
    check(bind(upstream, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0, "bind");
    check(listen(upstream, 8) == 0, "listen");
    socklen_t len = sizeof addr;
    check(getsockname(upstream, reinterpret_cast<sockaddr*>(&addr), &len) == 0, "getsockname");
    uint16_t upstream_port = ntohs(addr.sin_port);

    // The configuration as an application would read it from a file: one route, one shard.
    std::string toml = "[engine]\nshards = 1\nlog_level = \"warn\"\n"
                       "[[route]]\nname = \"consumer\"\nlisten = [\"127.0.0.1:0\"]\n"
                       "  [[route.upstream]]\n  address = \"127.0.0.1:" +
                       std::to_string(upstream_port) + "\"\n";
    uringfwd::ConfigFileResult parsed = uringfwd::parse_config(toml, "consumer.toml");
    if (!parsed.config) {
        fail("configuration refused: " + (parsed.errors.empty() ? "?" : parsed.errors[0]));
    }

    std::unique_ptr<uringfwd::Engine> engine;
    try {
        engine = uringfwd::Engine::start(*parsed.config);
    } catch (const uringfwd::StartError& e) {
        fail(std::string("Engine::start: ") + e.what());
    }
    uint16_t engine_port = engine->listen_endpoint().port;

    int client = tcp_socket();
    sockaddr_in to_engine = loopback(engine_port);
    check(connect(client, reinterpret_cast<sockaddr*>(&to_engine), sizeof to_engine) == 0,
          "connect to the engine");
    pollfd waiting{upstream, POLLIN, 0};
    check(poll(&waiting, 1, 5000) == 1, "the engine's connection to the upstream (poll)");
    int server = accept4(upstream, nullptr, nullptr, SOCK_CLOEXEC);
    check(server >= 0, "accept");

    constexpr std::string_view request = "hello through liburingfwd";
    constexpr std::string_view reply = "and back again";
    send_all(client, request);
    if (receive_exactly(server, request.size()) != request) {
        fail("the upstream received other bytes than the client sent");
    }
    send_all(server, reply);
    if (receive_exactly(client, reply.size()) != reply) {
        fail("the client received other bytes than the upstream sent");
    }

    close(client);
    close(server);
    close(upstream);
    engine->stop(std::chrono::milliseconds(0));
    engine->wait();

    std::printf("consumer: liburingfwd %.*s (headers %s): %zu + %zu bytes through 127.0.0.1:%u "
                "-> 127.0.0.1:%u: ok\n",
                static_cast<int>(uringfwd::version().size()), uringfwd::version().data(),
                URINGFWD_VERSION_STRING, request.size(), reply.size(),
                static_cast<unsigned>(engine_port), static_cast<unsigned>(upstream_port));
    return 0;
}
