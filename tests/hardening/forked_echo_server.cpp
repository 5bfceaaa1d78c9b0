#include "tests/hardening/forked_echo_server.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <new>
#include <system_error>

namespace uringfwd::test {
namespace {

static_assert(std::atomic<uint64_t>::is_always_lock_free,
              "counters shared across processes must not need a lock");

constexpr int kListenFd = 3;
constexpr int kMaxEvents = 256;
// Writes block this long at most before the connection is dropped: a peer that stopped
// reading must not freeze every other connection.
constexpr int kWriteTimeoutMs = 10000;

// Static: the child of a multi-threaded parent must not allocate (another thread may
// have held the allocator's lock at fork time).
char echo_buffer[64 * 1024];

bool write_all(int fd, const char* data, ssize_t size) {
    while (size > 0) {
        const ssize_t n = ::send(fd, data, static_cast<std::size_t>(size), MSG_NOSIGNAL);
        if (n > 0) {
            data += n;
            size -= n;
            continue;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && errno == EAGAIN) {
            pollfd p{fd, POLLOUT, 0};
            if (::poll(&p, 1, kWriteTimeoutMs) <= 0) {
                return false;
            }
            continue;
        }
        return false;
    }
    return true;
}

// Only system calls from here on (async-signal-safe after fork).
[[noreturn]] void serve(std::atomic<uint64_t>* accepted, std::atomic<uint64_t>* open) {
    const int ep = ::epoll_create1(0);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = kListenFd;
    if (ep < 0 || ::epoll_ctl(ep, EPOLL_CTL_ADD, kListenFd, &ev) != 0) {
        ::_exit(2);
    }
    epoll_event events[kMaxEvents];
    for (;;) {
        const int n = ::epoll_wait(ep, events, kMaxEvents, -1);
        for (int i = 0; i < n; ++i) {
            const int fd = events[i].data.fd;
            if (fd == kListenFd) {
                for (;;) {
                    const int c = ::accept4(kListenFd, nullptr, nullptr, SOCK_NONBLOCK);
                    if (c < 0) {
                        break;
                    }
                    epoll_event cev{};
                    cev.events = EPOLLIN | EPOLLRDHUP;
                    cev.data.fd = c;
                    ::epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev);
                    accepted->fetch_add(1);
                    open->fetch_add(1);
                }
                continue;
            }
            const ssize_t got = ::recv(fd, echo_buffer, sizeof(echo_buffer), 0);
            if (got < 0 && (errno == EAGAIN || errno == EINTR)) {
                continue;
            }
            if (got <= 0 || !write_all(fd, echo_buffer, got)) {
                ::close(fd); // also leaves the epoll set
                open->fetch_sub(1);
            }
        }
    }
}

} // namespace

ForkedEchoServer::ForkedEchoServer(Listener listener) : endpoint_(listener.endpoint()) {
    void* mem =
        ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        throw std::system_error(errno, std::generic_category(), "mmap");
    }
    shared_ = new (mem) Shared;
    const int listen_fd = listener.fd();
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ < 0) {
        throw std::system_error(errno, std::generic_category(), "fork");
    }
    if (pid_ == 0) {
        // Die with the test: an orphaned echo server would hold its port and sockets.
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) {
            ::_exit(1);
        }
        // Keep only the listener: inherited client sockets would stay open in here and
        // hide the closes the tests wait for.
        if (::dup2(listen_fd, kListenFd) < 0) {
            ::_exit(1);
        }
        ::close_range(kListenFd + 1, ~0U, 0);
        // The accept loop drains the backlog until EAGAIN.
        ::fcntl(kListenFd, F_SETFL, ::fcntl(kListenFd, F_GETFL) | O_NONBLOCK);
        serve(&shared_->accepted, &shared_->open);
    }
    // `listener` goes out of scope here: the parent's copy of the listening socket closes.
}

ForkedEchoServer::~ForkedEchoServer() {
    kill();
    ::munmap(shared_, sizeof(Shared));
}

void ForkedEchoServer::kill() {
    if (pid_ > 0) {
        ::kill(pid_, SIGKILL);
        int status = 0;
        while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
        }
        pid_ = -1;
    }
}

uint64_t ForkedEchoServer::accepted() const {
    return shared_->accepted.load();
}
uint64_t ForkedEchoServer::open_connections() const {
    return shared_->open.load();
}

} // namespace uringfwd::test
