// Engine::forward and forward_pair: connections the application accepted itself, handed
// to a shard through a queue and the shard's eventfd.
//
// Why an eventfd and not IORING_OP_MSG_RING (bench/handover/wake_bench.cpp, measured in
// bench/RESULTS.md run 6): both wake a sleeping shard in 5.8-5.9 µs; MSG_RING saves the
// shard 0.7 µs of CPU per wake-up (no read, no re-arm) but costs the caller 0.4 µs more,
// and it needs an io_uring on every thread that calls forward() (one per caller thread,
// or one shared under a lock). The eventfd needs nothing from the caller.
#include "api/engine_impl.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <cerrno>

namespace uringfwd {

namespace {

// Checks that `fd` is an open stream socket and prepares it as the engine prepares its
// own: non-blocking (docs/kernel.md §2.1: a splice from a blocking socket would park an
// io-wq worker) and, for TCP, TCP_NODELAY. Done here, on the caller's thread, in as few
// system calls as it takes (bench/RESULTS.md run 7: each costs 0.5-1 µs on the benchmark
// VM, all of them in the hand-over's latency):
// - setsockopt(IPPROTO_TCP, TCP_NODELAY) succeeds on TCP sockets only (an AF_UNIX
//   socket answers EOPNOTSUPP, UDP ENOPROTOOPT, a non-socket ENOTSOCK, a closed fd
//   EBADF), so for TCP it is the check and the setting at once; the shard no longer asks
//   getsockname() whether the client is TCP nor sets the option itself.
// - ioctl(FIONBIO) sets O_NONBLOCK without reading the flags first (fs/ioctl.c,
//   ioctl_fionbio), where fcntl takes F_GETFL and F_SETFL.
// Only a socket that is not TCP pays getsockopt(SO_TYPE) to be told a stream.
// Returns false when the engine cannot take it.
bool prepare_socket(int fd) {
    if (fd < 0)
        return false;
    int one = 1;
    bool tcp = ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == 0;
    if (!tcp) {
        if (errno == EBADF || errno == ENOTSOCK)
            return false;
        int type = 0;
        socklen_t len = sizeof(type);
        if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM)
            return false;
    }
    return ::ioctl(fd, FIONBIO, &one) == 0;
}

} // namespace

std::error_code Engine::Impl::hand_over(int client_fd, int upstream_fd, std::string_view route,
                                        std::span<const std::byte> already_read) {
    if (stopping_.load())
        return std::make_error_code(std::errc::operation_canceled);
    if (!serves_route(route))
        return std::make_error_code(std::errc::invalid_argument);
    if (!prepare_socket(client_fd) || (upstream_fd >= 0 && !prepare_socket(upstream_fd)))
        return std::make_error_code(std::errc::bad_file_descriptor);

    engine::Handoff handoff{
        .client = engine::UnservedSocket::plain(client_fd),
        .upstream = upstream_fd >= 0 ? engine::UnservedSocket::plain(upstream_fd)
                                     : engine::UnservedSocket{},
        .route = std::string(route),
        .preamble = std::vector<std::byte>(already_read.begin(), already_read.end()),
    };
    // The shard of this CPU keeps the connection's memory and wake-ups on the CPU (so
    // the NUMA node) of the thread that accepted it.
    return deliver(handoff, ::sched_getcpu());
}

bool Engine::Impl::serves_route(std::string_view route) const {
    std::lock_guard lock(plan_mu_);
    for (const engine::Route& each : routes_->routes)
        if (each.name == route)
            return true;
    return false;
}

std::error_code Engine::Impl::deliver(engine::Handoff& handoff, int cpu) {
    engine::Shard* target = nullptr;
    for (const auto& shard : shards_)
        if (shard->cpu() == cpu)
            target = shard.get();
    if (target == nullptr) {
        uint64_t fewest = UINT64_MAX;
        for (const auto& shard : shards_) {
            uint64_t open = shard->counters().active.load(std::memory_order_relaxed);
            if (open < fewest) {
                fewest = open;
                target = shard.get();
            }
        }
    }
    if (target->hand_over(handoff))
        return {};
    // That shard has ended (a stopping one ends once it holds no connection): any other
    // still serving takes it.
    for (const auto& shard : shards_)
        if (shard.get() != target && shard->hand_over(handoff))
            return {};
    // Refused by all: the caller keeps its fds.
    (void)handoff.client.release_fd();
    (void)handoff.upstream.release_fd();
    return std::make_error_code(std::errc::operation_canceled);
}

} // namespace uringfwd
