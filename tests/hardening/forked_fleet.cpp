#include "tests/hardening/forked_fleet.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>
#include <vector>

namespace uringfwd::test {

enum class Kind : uint32_t { Open, Echo };

// Commands and replies alike: SOCK_SEQPACKET keeps each one a single record.
struct FleetMessage {
    Kind kind = Kind::Open;
    char host[64] = {};
    uint16_t port = 0;
    int cpu = -1;
    uint64_t count = 0; // Open: how many; Echo: the first tag
    int64_t quiet_ms = 0;
    uint64_t a = 0, b = 0, c = 0; // replies: connected/failed, good/bad/silent
    double seconds = 0;
    char error[128] = {};
};

namespace {

constexpr int kControlFd = 3;
constexpr auto kAnswerWithin = std::chrono::seconds{90};

[[noreturn]] void serve_commands() {
    std::vector<UniqueFd> fds;
    for (;;) {
        FleetMessage m;
        const ssize_t n = ::recv(kControlFd, &m, sizeof(m), 0);
        if (n != sizeof(m))
            ::_exit(0); // the test closed its end (or is gone): drop every connection
        const auto start = Clock::now();
        if (m.kind == Kind::Open) {
            Endpoint to;
            to.host = m.host;
            to.port = m.port;
            Fleet fleet = open_fleet(to, m.count, m.cpu, Deadline{std::chrono::seconds{60}});
            m.a = fleet.fds.size();
            m.b = fleet.failed;
            std::strncpy(m.error, fleet.first_error.c_str(), sizeof(m.error) - 1);
            for (UniqueFd& fd : fleet.fds)
                fds.push_back(std::move(fd));
        } else {
            const EchoTally t = echo_all(fds, m.count, std::chrono::milliseconds{m.quiet_ms},
                                         Deadline{std::chrono::seconds{60}});
            m.a = t.good;
            m.b = t.bad;
            m.c = t.silent;
        }
        m.seconds = std::chrono::duration<double>(Clock::now() - start).count();
        if (::send(kControlFd, &m, sizeof(m), MSG_NOSIGNAL) != sizeof(m))
            ::_exit(1);
    }
}

} // namespace

ForkedFleet::ForkedFleet() {
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
        throw std::system_error(errno, std::generic_category(), "socketpair");
    UniqueFd mine{pair[0]};
    UniqueFd theirs{pair[1]};
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ < 0)
        throw std::system_error(errno, std::generic_category(), "fork");
    if (pid_ == 0) {
        // Die with the test; keep nothing of the test's but the control socket.
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent || ::dup2(theirs.get(), kControlFd) < 0)
            ::_exit(1);
        ::close_range(kControlFd + 1, ~0U, 0);
        serve_commands();
    }
    control_ = std::move(mine);
}

ForkedFleet::~ForkedFleet() {
    control_.reset(); // the child sees EOF and exits, closing its connections
    int status = 0;
    for (int tries = 0; tries < 100; ++tries) {
        if (::waitpid(pid_, &status, WNOHANG) == pid_)
            return;
        ::usleep(50 * 1000);
    }
    ::kill(pid_, SIGKILL);
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
}

std::optional<FleetMessage> ForkedFleet::ask(const FleetMessage& command) {
    if (::send(control_.get(), &command, sizeof(command), MSG_NOSIGNAL) != sizeof(command))
        return std::nullopt;
    pollfd p{control_.get(), POLLIN, 0};
    const Deadline deadline{kAnswerWithin};
    while (!deadline.expired()) {
        if (::poll(&p, 1, deadline.poll_timeout_ms()) > 0) {
            FleetMessage reply;
            if (::recv(control_.get(), &reply, sizeof(reply), 0) != sizeof(reply))
                return std::nullopt;
            return reply;
        }
    }
    return std::nullopt;
}

std::optional<ForkedFleet::Opened> ForkedFleet::open(const Endpoint& to, std::size_t count,
                                                     int cpu) {
    FleetMessage m;
    m.kind = Kind::Open;
    if (to.host.size() >= sizeof(m.host))
        throw std::invalid_argument("host too long: " + to.host);
    std::strncpy(m.host, to.host.c_str(), sizeof(m.host) - 1);
    m.port = to.port;
    m.cpu = cpu;
    m.count = count;
    const auto reply = ask(m);
    if (!reply)
        return std::nullopt;
    return Opened{reply->a, reply->b, reply->seconds, reply->error};
}

std::optional<EchoTally> ForkedFleet::echo(uint64_t first_tag, std::chrono::milliseconds quiet) {
    FleetMessage m;
    m.kind = Kind::Echo;
    m.count = first_tag;
    m.quiet_ms = quiet.count();
    const auto reply = ask(m);
    if (!reply)
        return std::nullopt;
    return EchoTally{reply->a, reply->b, reply->c};
}

} // namespace uringfwd::test
