// Blocking socket set-up for tests: connect, listen, accept, close. Every call that can
// wait takes a bound; failures throw std::system_error so a test stops at the first
// broken step instead of hanging or carrying on with a bad fd.
#pragma once

#include "tests/support/deadline.hpp"
#include "tests/support/unique_fd.hpp"
#include "uringfwd/endpoint.hpp"

#include <optional>
#include <string>
#include <vector>

namespace uringfwd::test {

enum class Family { Inet4, Inet6, Unix };

// A listening socket that removes its Unix socket file when destroyed, so reruns do not
// trip over stale paths.
class Listener {
public:
    Listener() = default;
    Listener(UniqueFd fd, Endpoint endpoint);
    ~Listener();
    Listener(Listener&& other) noexcept;
    Listener& operator=(Listener&& other) noexcept;
    Listener(const Listener&) = delete;
    Listener& operator=(const Listener&) = delete;

    int fd() const { return fd_.get(); }
    // With the port resolved when it was 0.
    const Endpoint& endpoint() const { return endpoint_; }

private:
    void unlink_path();
    UniqueFd fd_;
    Endpoint endpoint_;
};

// Binds and listens on `where` (port 0 = ephemeral) with a deep backlog so bursts of
// connections in the concurrency tests are not dropped.
Listener listen_on(const Endpoint& where);
// 127.0.0.1:0, [::1]:0 or a fresh path under /tmp.
Listener listen_loopback(Family family);

// A fresh, unused Unix socket path under /tmp (the file does not exist yet).
std::string unique_unix_path(const std::string& tag);

// Connects within `timeout`; throws std::system_error naming the endpoint on failure.
UniqueFd connect_to(const Endpoint& to, milliseconds timeout = milliseconds{5000});
// Same, but reports failure as an errno value (0 on success) for tests that expect it.
int try_connect(const Endpoint& to, milliseconds timeout, UniqueFd& out);

// Waits for one connection; throws on timeout.
UniqueFd accept_one(int listen_fd, const Deadline& deadline);

// A loopback TCP port that is bound but not listening, held for as long as the
// returned fd lives: connecting to it is refused and nobody else can take the port.
struct ReservedPort {
    UniqueFd fd;
    Endpoint endpoint;
};
ReservedPort reserve_refusing_port();

// `count` distinct loopback TCP ports, free right now, for processes that must be
// configured with a fixed address (port 0 will not do: two processes, or two routes,
// must name the same one). They are taken below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), so no connect(2) of this test or another picks one as
// its local port before the process under test binds it, and each is held bound until
// all are chosen, so none is handed out twice.
std::vector<uint16_t> free_ports(std::size_t count);
uint16_t free_port();

// Whether a socket can be bound to [::1] here (IPv6 may be disabled in containers).
bool ipv6_loopback_available();

// The fd of this process connected to `peer_fd` (its peer is peer_fd's own address): an
// in-process engine's socket on plain fds, found through /proc/self/fd.
std::optional<int> fd_connected_to(int peer_fd);

// shutdown(SHUT_WR), ignoring ENOTCONN (the peer may already have reset).
void shutdown_write(int fd);
// Closes with SO_LINGER {1, 0} so the peer gets an RST instead of a FIN.
void abortive_close(UniqueFd& fd);

} // namespace uringfwd::test
