// An example gateway on liburingfwd's public API only: it accepts clients itself, reads a
// one-line preamble "ROUTE name\n" and hands each client to the engine with forward(),
// bytes read past the preamble included; the engine's observer writes an access log.
//   gateway LISTEN_PORT ROUTE=UPSTREAM [ROUTE=UPSTREAM...]
//   gateway 0 echo=127.0.0.1:9001 web=unix:/run/web.sock
#include <uringfwd/engine.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>

namespace {

// One line per closed connection. on_close runs on the shard threads, several at once,
// hence the mutex; it also makes a shard wait for stdout. A production log would fill one
// buffer per shard (ConnectionInfo::shard) and write them from a thread of its own.
class AccessLog : public uringfwd::ConnectionObserver {
public:
    void on_open(const uringfwd::ConnectionInfo&) override {}
    void on_close(const uringfwd::ConnectionRecord& r) override {
        std::time_t now = std::time(nullptr);
        char when[32];
        std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
        std::string upstream = r.upstream.host.empty() ? "-" : r.upstream.to_string();
        std::lock_guard lock(mutex_);
        std::printf("%s %.*s %s -> %s %llu %llu %lld %lld %.*s\n", when,
                    static_cast<int>(r.info.route.size()), r.info.route.data(),
                    r.info.client.to_string().c_str(), upstream.c_str(),
                    static_cast<unsigned long long>(r.bytes_to_upstream),
                    static_cast<unsigned long long>(r.bytes_to_client),
                    static_cast<long long>(r.connect_time.count()),
                    static_cast<long long>(r.duration.count()),
                    static_cast<int>(to_string(r.reason).size()), to_string(r.reason).data());
        std::fflush(stdout);
    }

private:
    std::mutex mutex_;
};

// Reads "ROUTE name\n" (at most 256 bytes, 5 s) and forwards the client; whatever arrived
// after the newline goes to the upstream first. Serial: a slow client holds up the next
// ones for up to 5 s, which a real gateway would avoid by reading preambles concurrently.
void serve(uringfwd::Engine& engine, int client) {
    timeval limit{5, 0};
    setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    char buf[256];
    size_t got = 0;
    const char* newline = nullptr;
    while (newline == nullptr && got < sizeof buf) {
        ssize_t n = recv(client, buf + got, sizeof buf - got, 0);
        if (n <= 0) {
            break;
        }
        newline = static_cast<const char*>(memchr(buf + got, '\n', static_cast<size_t>(n)));
        got += static_cast<size_t>(n);
    }
    std::string_view line(buf, newline == nullptr ? 0 : static_cast<size_t>(newline - buf));
    if (newline == nullptr || !line.starts_with("ROUTE ")) {
        std::fprintf(stderr, "gateway: no \"ROUTE name\" line from the client\n");
        close(client);
        return;
    }
    std::string_view route = line.substr(6);
    // The engine owns the socket from here: its reads must not inherit our timeout.
    limit = {0, 0};
    setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    auto rest = std::as_bytes(std::span(newline + 1, buf + got));
    if (std::error_code error = engine.forward(client, route, rest)) {
        std::fprintf(stderr, "gateway: route \"%.*s\": %s\n", static_cast<int>(route.size()),
                     route.data(), error.message().c_str());
        close(client); // on error the socket is still ours
    }
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: gateway LISTEN_PORT ROUTE=UPSTREAM [ROUTE=UPSTREAM...]\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    // Blocked before any thread starts, so every thread (the engine's too) inherits the
    // mask and SIGINT/SIGTERM reach only the sigtimedwait() below.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

    uint16_t port = 0;
    uringfwd::EngineConfig config;
    config.observer = std::make_shared<AccessLog>();
    std::unique_ptr<uringfwd::Engine> engine;
    try {
        unsigned long number = std::stoul(argv[1]);
        if (number > 65535) {
            throw std::out_of_range("port out of range");
        }
        port = static_cast<uint16_t>(number);
        for (int i = 2; i < argc; ++i) {
            std::string_view arg = argv[i];
            size_t eq = arg.find('=');
            if (eq == std::string_view::npos) {
                throw std::invalid_argument("expected ROUTE=UPSTREAM, got " + std::string(arg));
            }
            uringfwd::RouteConfig route;
            route.name = arg.substr(0, eq);
            // A route must listen somewhere; clients come through forward(), so an
            // ephemeral loopback port that nobody is told about will do.
            route.listen = {uringfwd::Endpoint::parse("127.0.0.1:0")};
            route.pool.members.push_back({uringfwd::Endpoint::parse(arg.substr(eq + 1))});
            config.routes.push_back(std::move(route));
        }
        engine = uringfwd::Engine::start(std::move(config));
    } catch (const std::exception& e) { // StartError; invalid_argument from parse(), stoul
        std::fprintf(stderr, "gateway: %s\n", e.what());
        return 1;
    }

    int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (bind(listener, reinterpret_cast<sockaddr*>(&addr), len) != 0 || listen(listener, 64) != 0 ||
        getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
        std::perror("gateway: listen");
        return 1;
    }
    std::printf("listening on 127.0.0.1:%u\n", static_cast<unsigned>(ntohs(addr.sin_port)));
    std::fflush(stdout);

    std::thread acceptor([&] {
        for (;;) {
            int client = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
            if (client >= 0) {
                serve(*engine, client);
            } else if (errno != ECONNABORTED) { // EINVAL: shutdown() below, we are stopping
                break;
            }
        }
    });

    // The main thread waits for a signal and prints the counters every 5 s meanwhile.
    const timespec period{5, 0};
    for (;;) {
        int sig = sigtimedwait(&stop_signals, nullptr, &period);
        if (sig == SIGINT || sig == SIGTERM) {
            break;
        }
        std::fprintf(stderr, "%s\n", engine->stats().to_line().c_str());
    }
    shutdown(listener, SHUT_RDWR);
    acceptor.join();
    close(listener);
    engine->stop();
    engine->wait();
    return 0;
}
