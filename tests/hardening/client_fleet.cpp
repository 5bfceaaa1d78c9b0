#include "tests/hardening/client_fleet.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fmt/core.h>
#include <stdexcept>

namespace uringfwd::test {
namespace {

constexpr std::size_t kTagBytes = sizeof(uint64_t);

// Pins the calling thread to one CPU while it lives; puts the old mask back after.
class PinnedThread {
public:
    explicit PinnedThread(int cpu) {
        if (cpu < 0 || ::pthread_getaffinity_np(::pthread_self(), sizeof(old_), &old_) != 0)
            return;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        if (int err = ::pthread_setaffinity_np(::pthread_self(), sizeof(one), &one); err != 0)
            throw std::runtime_error(fmt::format("pin to CPU {}: {}", cpu, std::strerror(err)));
        pinned_ = true;
    }
    ~PinnedThread() {
        if (pinned_)
            ::pthread_setaffinity_np(::pthread_self(), sizeof(old_), &old_);
    }
    PinnedThread(const PinnedThread&) = delete;
    PinnedThread& operator=(const PinnedThread&) = delete;

private:
    cpu_set_t old_{};
    bool pinned_ = false;
};

sockaddr_in ipv4_address(const Endpoint& to) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(to.port);
    if (to.kind != Endpoint::Kind::Inet ||
        ::inet_pton(AF_INET, to.host.c_str(), &addr.sin_addr) != 1)
        throw std::invalid_argument("open_fleet needs a numeric IPv4 endpoint: " + to.to_string());
    return addr;
}

void note_failure(Fleet& fleet, const char* what, int err) {
    fleet.reset += err == ECONNRESET ? 1 : 0;
    if (fleet.failed++ == 0)
        fleet.first_error = fmt::format("{}: {}", what, std::strerror(err));
}

// Waits until every connect in `pending` has finished (or the deadline); moves the
// established ones into the fleet.
void finish_connects(std::vector<UniqueFd>& pending, Fleet& fleet, const Deadline& deadline) {
    std::vector<pollfd> waiting;
    for (const UniqueFd& fd : pending)
        waiting.push_back({fd.get(), POLLOUT, 0});
    std::size_t left = waiting.size();
    while (left > 0 && !deadline.expired()) {
        if (::poll(waiting.data(), waiting.size(), std::min(deadline.poll_timeout_ms(), 1000)) <= 0)
            continue;
        for (std::size_t i = 0; i < waiting.size(); ++i) {
            if (waiting[i].fd < 0 || waiting[i].revents == 0)
                continue;
            int err = 0;
            socklen_t len = sizeof(err);
            ::getsockopt(waiting[i].fd, SOL_SOCKET, SO_ERROR, &err, &len);
            if (err == 0)
                fleet.fds.push_back(std::move(pending[i]));
            else
                note_failure(fleet, "connect", err);
            waiting[i].fd = -1;
            --left;
        }
    }
    for (std::size_t i = 0; i < waiting.size(); ++i)
        if (waiting[i].fd >= 0)
            note_failure(fleet, "connect", ETIMEDOUT);
    pending.clear();
}

} // namespace

Fleet open_fleet(const Endpoint& to, std::size_t count, int cpu, const Deadline& deadline,
                 std::size_t batch) {
    const sockaddr_in addr = ipv4_address(to);
    const PinnedThread pin{cpu};
    Fleet fleet;
    fleet.fds.reserve(count);
    const auto start = Clock::now();
    std::vector<UniqueFd> pending;
    while (fleet.fds.size() + fleet.failed < count && !deadline.expired()) {
        const std::size_t todo = std::min(batch, count - fleet.fds.size() - fleet.failed);
        for (std::size_t i = 0; i < todo; ++i) {
            UniqueFd fd{::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)};
            if (!fd) {
                note_failure(fleet, "socket", errno);
                continue;
            }
            if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0)
                fleet.fds.push_back(std::move(fd));
            else if (errno == EINPROGRESS)
                pending.push_back(std::move(fd));
            else
                note_failure(fleet, "connect", errno);
        }
        finish_connects(pending, fleet, deadline);
    }
    fleet.failed = count - fleet.fds.size();
    if (fleet.failed > 0 && fleet.first_error.empty())
        fleet.first_error = "the deadline passed before all were opened";
    fleet.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return fleet;
}

EchoTally echo_all(const std::vector<UniqueFd>& fds, uint64_t first_tag, milliseconds quiet,
                   const Deadline& deadline) {
    EchoTally tally;
    UniqueFd ep{::epoll_create1(EPOLL_CLOEXEC)};
    if (!ep)
        throw std::runtime_error(fmt::format("epoll_create1: {}", std::strerror(errno)));
    std::vector<uint64_t> got(fds.size(), 0);
    std::vector<std::size_t> have(fds.size(), 0);
    std::size_t left = 0;
    for (std::size_t i = 0; i < fds.size(); ++i) {
        const uint64_t tag = first_tag + i;
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLRDHUP;
        ev.data.u64 = i;
        if (::send(fds[i].get(), &tag, kTagBytes, MSG_NOSIGNAL) != kTagBytes ||
            ::epoll_ctl(ep.get(), EPOLL_CTL_ADD, fds[i].get(), &ev) != 0) {
            ++tally.bad;
            continue;
        }
        ++left;
    }
    auto last_progress = Clock::now();
    std::vector<epoll_event> events(1024);
    while (left > 0 && !deadline.expired() && Clock::now() - last_progress < quiet) {
        const int n = ::epoll_wait(ep.get(), events.data(), static_cast<int>(events.size()),
                                   std::min(deadline.poll_timeout_ms(), 200));
        for (int e = 0; e < n; ++e) {
            const std::size_t i = events[e].data.u64;
            auto* into = reinterpret_cast<char*>(&got[i]) + have[i];
            const ssize_t r = ::recv(fds[i].get(), into, kTagBytes - have[i], MSG_DONTWAIT);
            if (r < 0 && errno == EAGAIN)
                continue;
            if (r > 0)
                have[i] += static_cast<std::size_t>(r);
            if (r > 0 && have[i] < kTagBytes)
                continue;
            // Whole, closed or failed: this one is settled.
            const bool intact = have[i] == kTagBytes && got[i] == first_tag + i;
            ++(intact ? tally.good : tally.bad);
            ::epoll_ctl(ep.get(), EPOLL_CTL_DEL, fds[i].get(), nullptr);
            --left;
            last_progress = Clock::now();
        }
    }
    tally.silent = left;
    return tally;
}

} // namespace uringfwd::test
