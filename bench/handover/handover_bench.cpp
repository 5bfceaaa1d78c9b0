// How long does a hand-over take, from Engine::forward() to the first forwarded byte
// arriving at the upstream? Issue 11's target: a median of at most 5 µs.
//
// The gateway thread (this program's main thread, on CPU 0) accepts a loopback client
// itself, as a gateway does, then hands it to a one-shard engine (CPU 1). Two cases,
// alternating in rounds:
//
//   forward_pair  the gateway connected the upstream itself; the client has already
//                 sent one byte. Measured: forward_pair() until that byte is read at
//                 the upstream's end. This is the hand-over itself: queue + wake-up,
//                 the shard taking the connection, its first receive and send.
//   forward       the engine connects the upstream (a member of the route's pool) and
//                 sends the bytes the gateway already read (a one-byte preamble) first.
//                 Measured: forward() until the preamble is read by the upstream's
//                 accepted socket; it adds a loopback TCP connect and accept to the
//                 above.
//
// Between two hand-overs the program sleeps 100 µs so the shard is asleep when the next
// one comes (the slower, common case for a gateway that is not saturated).
//
// Build: meson setup build-micro -Dbench=true -Dtests=false && ninja -C build-micro
// Run:   build-micro/bench/handover_bench [rounds] [hand-overs-per-round] [busy-poll-µs] [spin]
//        (a third argument turns on the engine's busy polling: an idle shard spins that
//        long before it sleeps, so a hand-over finds it awake; "spin" makes the upstream's
//        reader spin on a non-blocking recv instead of sleeping in it)
#include "bench_util.hpp"

#include <uringfwd/engine.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace handover_bench_util;

// A blocking loopback listener on an ephemeral port.
struct Listener {
    int fd = -1;
    uint16_t port = 0;
    Listener() {
        fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof(addr);
        if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
            ::listen(fd, 128) != 0 ||
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
            die("listen");
        port = ntohs(addr.sin_port);
    }
    ~Listener() { ::close(fd); }
    int accept_one() const {
        int s = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (s < 0)
            die("accept");
        return s;
    }
};

int connect_to(uint16_t port) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0)
        die("connect");
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

// A blocked recv() adds the reader's own wake-up (about 6 µs here, RESULTS.md run 6) to
// what is measured; spinning with MSG_DONTWAIT leaves only the engine's part.
void read_one(int fd, bool spin) {
    char byte = 0;
    for (;;) {
        ssize_t n = ::recv(fd, &byte, 1, spin ? MSG_DONTWAIT : 0);
        if (n == 1)
            return;
        if (n < 0 && errno == EAGAIN && spin)
            continue;
        die("recv at the upstream");
    }
}

// One hand-over of each kind; returns nanoseconds to the first byte.
uint64_t time_forward_pair(uringfwd::Engine& engine, const Listener& front, const Listener& back,
                           bool spin) {
    int client = connect_to(front.port);
    int accepted = front.accept_one(); // what the gateway hands over
    int upstream = connect_to(back.port);
    int upstream_end = back.accept_one();
    if (::send(client, "x", 1, 0) != 1)
        die("send");
    uint64_t t0 = now_ns();
    if (std::error_code error = engine.forward_pair(accepted, upstream, "bench")) {
        std::fprintf(stderr, "forward_pair: %s\n", error.message().c_str());
        std::exit(1);
    }
    read_one(upstream_end, spin);
    uint64_t elapsed = now_ns() - t0;
    ::close(client);
    ::close(upstream_end);
    return elapsed;
}

uint64_t time_forward(uringfwd::Engine& engine, const Listener& front, const Listener& back,
                      bool spin) {
    int client = connect_to(front.port);
    int accepted = front.accept_one();
    const std::byte preamble[1] = {std::byte{'x'}};
    uint64_t t0 = now_ns();
    if (std::error_code error = engine.forward(accepted, "bench", preamble)) {
        std::fprintf(stderr, "forward: %s\n", error.message().c_str());
        std::exit(1);
    }
    int upstream_end = back.accept_one();
    read_one(upstream_end, spin);
    uint64_t elapsed = now_ns() - t0;
    ::close(client);
    ::close(upstream_end);
    return elapsed;
}

} // namespace

int main(int argc, char** argv) {
    int rounds = argc > 1 ? std::atoi(argv[1]) : 7;
    int per_round = argc > 2 ? std::atoi(argv[2]) : 1000;
    int busy_poll_us = argc > 3 ? std::atoi(argv[3]) : 0;
    bool spin = argc > 4 && std::string(argv[4]) == "spin";
    ::signal(SIGPIPE, SIG_IGN);
    int shard_cpu = std::thread::hardware_concurrency() > 1 ? 1 : 0;

    Listener front, back;
    uringfwd::EngineConfig config;
    config.placement.cpus = {shard_cpu};
    config.placement.shards = 1;
    config.ring.busy_poll = std::chrono::microseconds(busy_poll_us);
    uringfwd::RouteConfig route;
    route.name = "bench";
    route.listen = {uringfwd::Endpoint::parse("127.0.0.1:0")};
    route.pool.members.push_back(
        {uringfwd::Endpoint::parse("127.0.0.1:" + std::to_string(back.port))});
    config.routes.push_back(std::move(route));
    auto engine = uringfwd::Engine::start(std::move(config));
    pin(0); // after start: the shard thread keeps its own pinning

    std::printf(
        "handover_bench: %d rounds x %d hand-overs per kind; gateway on CPU 0, shard on CPU %d\n",
        rounds, per_round, shard_cpu);
    std::vector<double> pair_median, pair_p99, forward_median, forward_p99;
    for (int r = 0; r < rounds; ++r) {
        std::vector<uint64_t> pair, forward;
        for (int i = 0; i < per_round; ++i) {
            timespec pause{0, 100'000};
            nanosleep(&pause, nullptr);
            pair.push_back(time_forward_pair(*engine, front, back, spin));
            nanosleep(&pause, nullptr);
            forward.push_back(time_forward(*engine, front, back, spin));
        }
        pair_median.push_back(percentile(pair, 0.5) / 1000);
        pair_p99.push_back(percentile(pair, 0.99) / 1000);
        forward_median.push_back(percentile(forward, 0.5) / 1000);
        forward_p99.push_back(percentile(forward, 0.99) / 1000);
    }
    engine->stop(std::chrono::milliseconds(0));
    engine->wait();
    std::printf("%-13s %12s %12s\n", "kind", "median µs", "p99 µs");
    std::printf("%-13s %12.2f %12.2f\n", "forward_pair", median(pair_median), median(pair_p99));
    std::printf("%-13s %12.2f %12.2f\n", "forward", median(forward_median), median(forward_p99));
    std::printf("(medians over rounds of each round's median and p99)\n");
    return 0;
}
