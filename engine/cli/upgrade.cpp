#include "cli/upgrade.hpp"

#include <fmt/format.h>

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string_view>

extern char** environ;

namespace uringfwd::cli {
namespace {

// Below the kernel's SCM_MAX_FD (253, include/net/scm.h) per message.
constexpr std::size_t kFdsPerMessage = 250;
// How long either side waits for the other's next message. The old process waits
// while the new one starts its engine (shards, rings, pipes): seconds at most.
constexpr int kReplyTimeoutSeconds = 30;

sockaddr_un unix_address(const std::string& path, socklen_t& length) {
    sockaddr_un address{};
    if (path.empty() || path.size() >= sizeof(address.sun_path))
        throw std::runtime_error(fmt::format("upgrade socket: path '{}' is empty or too long "
                                             "(at most {} bytes)",
                                             path, sizeof(address.sun_path) - 1));
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, path.data(), path.size());
    length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + 1);
    return address;
}

void set_timeout(int fd) {
    timeval tv{kReplyTimeoutSeconds, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

void send_text(int fd, std::string_view text, const int* fds = nullptr, std::size_t count = 0) {
    iovec iov{const_cast<char*>(text.data()), text.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kFdsPerMessage)];
    if (count > 0) {
        msg.msg_control = control;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * count);
        cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
        cmsg->cmsg_level = SOL_SOCKET;
        cmsg->cmsg_type = SCM_RIGHTS;
        cmsg->cmsg_len = CMSG_LEN(sizeof(int) * count);
        std::memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * count);
    }
    if (::sendmsg(fd, &msg, MSG_NOSIGNAL) < 0)
        throw std::runtime_error(fmt::format("upgrade socket: send: {}", std::strerror(errno)));
}

// One message; fds it carries are appended to `fds` (close-on-exec). Throws on an
// error, a timeout or the peer closing.
std::string receive_text(int fd, std::vector<ops::UniqueFd>* fds = nullptr) {
    char buffer[256];
    iovec iov{buffer, sizeof(buffer)};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kFdsPerMessage)];
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    const ssize_t n = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0)
        throw std::runtime_error(
            fmt::format("upgrade socket: receive: {}",
                        errno == EAGAIN ? "no answer within 30 s" : std::strerror(errno)));
    if (n == 0)
        throw std::runtime_error("upgrade socket: the other process closed the connection");
    for (cmsghdr* cmsg = CMSG_FIRSTHDR(&msg); cmsg != nullptr; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
        if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS)
            continue;
        const std::size_t count = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (std::size_t i = 0; i < count; ++i) {
            int passed = -1;
            std::memcpy(&passed, CMSG_DATA(cmsg) + i * sizeof(int), sizeof(int));
            ops::UniqueFd owned(passed);
            if (fds != nullptr)
                fds->push_back(std::move(owned));
        }
    }
    if (msg.msg_flags & MSG_CTRUNC)
        throw std::runtime_error("upgrade socket: too many fds in one message");
    return std::string(buffer, static_cast<std::size_t>(n));
}

} // namespace

std::optional<UpgradeTakeover> UpgradeTakeover::connect(const std::string& path) {
    socklen_t length = 0;
    const sockaddr_un address = unix_address(path, length);
    UpgradeTakeover out;
    out.conn_.reset(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    if (!out.conn_)
        throw std::runtime_error(fmt::format("upgrade socket: {}", std::strerror(errno)));
    if (::connect(out.conn_.get(), reinterpret_cast<const sockaddr*>(&address), length) != 0) {
        // Nobody there, or a file left by a process that ended: a first start.
        if (errno == ENOENT || errno == ECONNREFUSED)
            return std::nullopt;
        throw std::runtime_error(
            fmt::format("upgrade socket {}: connect: {}", path, std::strerror(errno)));
    }
    set_timeout(out.conn_.get());
    send_text(out.conn_.get(), "take-over");
    for (;;) {
        std::vector<ops::UniqueFd> passed;
        const std::string text = receive_text(out.conn_.get(), &passed);
        if (text == "fds") {
            for (ops::UniqueFd& fd : passed)
                out.fds_.push_back(std::move(fd));
            continue;
        }
        if (text.rfind("control ", 0) == 0 && passed.size() == 1) {
            out.control_path_ = text.substr(8);
            out.control_ = std::move(passed.front());
            continue;
        }
        if (text.rfind("end ", 0) == 0) {
            out.old_pid_ = static_cast<pid_t>(std::atol(text.c_str() + 4));
            break;
        }
        throw std::runtime_error(fmt::format("upgrade socket: unexpected message '{}'", text));
    }
    return out;
}

ops::UniqueFd UpgradeTakeover::take_control_socket(const std::string& path) {
    // None, or at another path: ours is bound anew, and the old one's file stays its own.
    if (!control_ || path != control_path_)
        return {};
    control_taken_ = true;
    return std::move(control_);
}

std::vector<int> UpgradeTakeover::fds() const {
    std::vector<int> out;
    for (const ops::UniqueFd& fd : fds_)
        out.push_back(fd.get());
    return out;
}

bool UpgradeTakeover::finish(const ProcessLog& log) {
    fds_.clear();     // the engine holds its own dups
    control_.reset(); // one we did not take: the old process keeps its own
    try {
        send_text(conn_.get(), control_taken_ ? "accepting control" : "accepting");
        const std::string reply = receive_text(conn_.get());
        if (reply != "released")
            throw std::runtime_error(fmt::format("upgrade socket: unexpected '{}'", reply));
    } catch (const std::exception& e) {
        log.warn("upgrade: {}; process {} may still accept until it ends", e.what(),
                 static_cast<int>(old_pid_));
        return false;
    }
    conn_.reset();
    return true;
}

UpgradeListener::UpgradeListener(std::string path) : path_(std::move(path)) {
    socklen_t length = 0;
    const sockaddr_un address = unix_address(path_, length);
    fd_.reset(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd_)
        throw std::runtime_error(fmt::format("upgrade socket: {}", std::strerror(errno)));
    ::unlink(path_.c_str());
    if (::bind(fd_.get(), reinterpret_cast<const sockaddr*>(&address), length) != 0 ||
        ::chmod(path_.c_str(), 0600) != 0 || ::listen(fd_.get(), 4) != 0)
        throw std::runtime_error(fmt::format("upgrade socket {}: {}", path_, std::strerror(errno)));
}

UpgradeListener::~UpgradeListener() {
    if (!handed_over_)
        ::unlink(path_.c_str());
}

bool UpgradeListener::serve_successor(Engine& engine, const ProcessLog& log, int control_fd,
                                      const std::string& control_path) {
    if (handed_over_)
        return false;
    ops::UniqueFd conn(::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!conn)
        return false; // EAGAIN: nobody asked
    // The file is mode 0600; a process of another user reaching it anyway (a
    // directory with other rules) gets nothing.
    ucred peer{};
    socklen_t peer_length = sizeof(peer);
    if (::getsockopt(conn.get(), SOL_SOCKET, SO_PEERCRED, &peer, &peer_length) != 0 ||
        peer.uid != ::geteuid()) {
        log.warn("upgrade: refused a process of uid {}", static_cast<unsigned>(peer.uid));
        return false;
    }
    set_timeout(conn.get());
    try {
        if (receive_text(conn.get()) != "take-over")
            throw std::runtime_error("upgrade socket: unexpected request");
        const std::vector<int> fds = engine.listener_fds();
        for (std::size_t i = 0; i < fds.size(); i += kFdsPerMessage)
            send_text(conn.get(), "fds", fds.data() + i, std::min(kFdsPerMessage, fds.size() - i));
        if (control_fd >= 0)
            send_text(conn.get(), "control " + control_path, &control_fd, 1);
        send_text(conn.get(), fmt::format("end {}", ::getpid()));
        log.info("upgrade: process {} asked for the listening sockets; handed it {}",
                 static_cast<int>(peer.pid), fds.size());
        const std::string answer = receive_text(conn.get());
        if (answer != "accepting" && answer != "accepting control")
            throw std::runtime_error("upgrade socket: unexpected answer");
        successor_took_control_ = answer == "accepting control";
    } catch (const std::exception& e) {
        log.warn("upgrade: {}; serving on", e.what());
        return false;
    }
    // It accepts on the same sockets: stop taking clients (without shutting them
    // down), and leave the control socket's path to it.
    engine.release_listeners();
    handed_over_ = true;
    fd_.reset();
    try {
        send_text(conn.get(), "released");
    } catch (const std::exception&) {
        // It went away after accepting: nothing for us to undo.
    }
    log.info("upgrade: process {} accepts now; draining", static_cast<int>(peer.pid));
    return true;
}

pid_t start_successor(char** argv, const ProcessLog& log) {
    char buffer[4096];
    const ssize_t n = ::readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
    if (n <= 0) {
        log.error("SIGRTMIN+1: cannot read /proc/self/exe: {}", std::strerror(errno));
        return -1;
    }
    std::string path(buffer, static_cast<std::size_t>(n));
    constexpr std::string_view kDeleted = " (deleted)"; // fs/d_path.c d_path()
    if (path.size() > kDeleted.size() &&
        path.compare(path.size() - kDeleted.size(), kDeleted.size(), kDeleted) == 0)
        path.resize(path.size() - kDeleted.size());
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    pid_t pid = -1;
    const int rc = ::posix_spawn(&pid, path.c_str(), nullptr, &attr, argv, environ);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
        log.error("SIGRTMIN+1: cannot start {}: {}", path, std::strerror(rc));
        return -1;
    }
    log.info("SIGRTMIN+1: started {} as process {} to take over", path, static_cast<int>(pid));
    return pid;
}

} // namespace uringfwd::cli
