#include "cli/upgrade.hpp"
#include "cli/seqpacket.hpp"
#include "uringfwd/socket_file.hpp"

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
    send_message(out.conn_.get(), "take-over");
    for (;;) {
        std::vector<ops::UniqueFd> passed;
        const std::string text = receive_message(out.conn_.get(), &passed);
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
            out.offers_connections_ = text.ends_with(" connections");
            out.offers_pipes_ = text.ends_with(" pipes connections");
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

bool UpgradeTakeover::finish(const ProcessLog& log, bool take_connections) {
    fds_.clear();     // the engine holds its own dups
    control_.reset(); // one we did not take: the old process keeps its own
    take_connections = take_connections && offers_connections_;
    try {
        std::string answer = control_taken_ ? "accepting control" : "accepting";
        if (take_connections)
            answer += offers_pipes_ ? " pipes connections" : " connections";
        send_message(conn_.get(), answer);
        const std::string reply = receive_message(conn_.get());
        if (reply != "released")
            throw std::runtime_error(fmt::format("upgrade socket: unexpected '{}'", reply));
    } catch (const std::exception& e) {
        log.warn("upgrade: {}; process {} may still accept until it ends", e.what(),
                 static_cast<int>(old_pid_));
        return false;
    }
    if (!take_connections)
        conn_.reset();
    return true;
}

UpgradeListener::UpgradeListener(std::string path) : path_(std::move(path)) {
    socklen_t length = 0;
    unix_address(path_, length); // throws, naming the path, when sun_path cannot hold it
    fd_.reset(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd_)
        throw std::runtime_error(fmt::format("upgrade socket: {}", std::strerror(errno)));
    // What is at the path is replaced only when it is a socket nobody accepts on: one
    // left by a process that ended, or by the process we took over from (it closes its
    // own before it says "released"). Anything else is the operator's, and a start must
    // never delete it (bind_unix_path throws, naming what is there).
    if (bind_unix_path(fd_.get(), path_, fmt::format("upgrade socket {}", path_)) != 0)
        throw std::runtime_error(fmt::format("upgrade socket {}: {}", path_, std::strerror(errno)));
    // Ours from here on: removed when we end, unless a successor has it by then or
    // something else is at the path.
    file_ = OwnedSocketFile(path_);
    if (::chmod(path_.c_str(), 0600) != 0 || ::listen(fd_.get(), 4) != 0)
        throw std::runtime_error(fmt::format("upgrade socket {}: {}", path_, std::strerror(errno)));
}

bool UpgradeListener::serve_successor(Engine& engine, const ProcessLog& log, int control_fd,
                                      const std::string& control_path, bool offer_connections) {
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
        if (receive_message(conn.get()) != "take-over")
            throw std::runtime_error("upgrade socket: unexpected request");
        const std::vector<int> fds = engine.listener_fds();
        for (std::size_t i = 0; i < fds.size(); i += kFdsPerMessage)
            send_message(conn.get(), "fds", fds.data() + i,
                         std::min(kFdsPerMessage, fds.size() - i));
        if (control_fd >= 0)
            send_message(conn.get(), "control " + control_path, &control_fd, 1);
        send_message(conn.get(), fmt::format("end {}{}", ::getpid(),
                                             offer_connections ? " pipes connections" : ""));
        log.info("upgrade: process {} asked for the listening sockets; handed it {}",
                 static_cast<int>(peer.pid), fds.size());
        std::string answer = receive_message(conn.get());
        const bool takes_connections = offer_connections && answer.ends_with(" connections");
        if (takes_connections)
            answer.resize(answer.size() - std::string_view(" connections").size());
        successor_takes_pipes_ = takes_connections && answer.ends_with(" pipes");
        if (successor_takes_pipes_)
            answer.resize(answer.size() - std::string_view(" pipes").size());
        if (answer != "accepting" && answer != "accepting control")
            throw std::runtime_error("upgrade socket: unexpected answer");
        successor_took_control_ = answer == "accepting control";
        if (takes_connections)
            conversation_ = std::move(conn);
    } catch (const std::exception& e) {
        log.warn("upgrade: {}; serving on", e.what());
        return false;
    }
    // It accepts on the same sockets: stop taking clients (without shutting them
    // down), and leave the control socket's path to it.
    engine.release_listeners();
    handed_over_ = true;
    successor_pid_ = peer.pid;
    fd_.reset();
    file_.disown(); // the successor binds the path anew once it has "released"
    try {
        send_message(conversation_ ? conversation_.get() : conn.get(), "released");
    } catch (const std::exception&) {
        // It went away after accepting: nothing for us to undo (a conversation that
        // failed fails again at the first batch: we keep our connections).
    }
    log.info("upgrade: process {} accepts now; {}", static_cast<int>(peer.pid),
             conversation_ ? "handing over connections as they go quiet" : "draining");
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
