#include "shard/listener.hpp"

#include "net/listen_queue.hpp"
#include "net/sockets.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace uringfwd::engine {

namespace {

constexpr std::chrono::milliseconds kFirstAcceptBackoff{20};
constexpr std::chrono::milliseconds kMaxAcceptBackoff{1000};
constexpr int kListenBacklog = 4096;

bool is_wildcard(const SocketAddress& a) {
    if (a.family() == AF_INET)
        return reinterpret_cast<const sockaddr_in*>(&a.storage)->sin_addr.s_addr == INADDR_ANY;
    if (a.family() == AF_INET6)
        return IN6_IS_ADDR_UNSPECIFIED(
            &reinterpret_cast<const sockaddr_in6*>(&a.storage)->sin6_addr);
    return false;
}

} // namespace

bool is_fd_shortage(int err) {
    return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
}

std::string fd_shortage_cause(int err) {
    switch (err) {
    case EMFILE: {
        rlimit lim{};
        ::getrlimit(RLIMIT_NOFILE, &lim);
        return fmt::format("the process's fd limit is reached (EMFILE: RLIMIT_NOFILE {})",
                           static_cast<unsigned long long>(lim.rlim_cur));
    }
    case ENFILE:
        return "the system's file table is full (ENFILE: fs.file-max)";
    default:
        return fmt::format("out of kernel memory ({})", std::strerror(err));
    }
}

Listener::Listener(ShardIo& io, const Logger& log, const ListenerSetup& setup)
    : io_(io), log_(log), index_(setup.index), route_(setup.route), group_(setup.group) {
    if (setup.shared_fd >= 0) {
        fd_.reset(::fcntl(setup.shared_fd, F_DUPFD_CLOEXEC, 0));
        if (!fd_)
            throw std::runtime_error(fmt::format("dup listener: {}", std::strerror(errno)));
    } else {
        ListeningSocket socket = open_listener(setup.address, setup.options, kListenBacklog);
        fd_ = std::move(socket.fd);
        file_ = std::move(socket.file);
        if (!socket.mptcp_fallback.empty())
            log_.warn("listen {}: mptcp = true, but {}; it takes TCP clients only",
                      to_endpoint(setup.address).to_string(), socket.mptcp_fallback);
    }
    bound_ = local_address(fd_.get());
    nonblocking_ = (::fcntl(fd_.get(), F_GETFL) & O_NONBLOCK) != 0;
    socket_inode_ = engine::socket_inode(fd_.get());
    direct_ = setup.direct && !is_wildcard(bound_);
    // One setsockopt here instead of one per client (a syscall, or an operation and a
    // completion on direct descriptors): what is set on a listener is set on the
    // sockets it accepts (clients_need_no_delay()). An inherited listener gets it too,
    // which changes nothing for the process that shares it: it set the same.
    if (is_tcp())
        clients_inherit_no_delay_ = set_no_delay(fd_.get());
    // Steering (docs/kernel.md §9): see set_incoming_cpu() and attach_cpu_steering().
    if (setup.set_incoming_cpu && setup.cpu >= 0) {
        if (int err = set_incoming_cpu(fd_.get(), setup.cpu); err != 0)
            log_.warn("SO_INCOMING_CPU: {}", std::strerror(err));
        else
            steering_ = "incoming cpu";
    }
    if (setup.steering_base) {
        if (int err = attach_cpu_steering(fd_.get(), *setup.steering_base); err != 0)
            log_.warn("cannot attach the reuseport CPU steering program ({}); connections "
                      "are spread by the kernel's hash",
                      std::strerror(err));
        else
            steering_ = "incoming cpu + bpf";
    }
}

void Listener::arm() {
    if (one_at_a_time_ && !direct_) {
        // A client waits when the listening socket is readable (net/ipv4/
        // inet_connection_sock.c inet_csk_listen_poll); the shard accepts it with
        // accept_now() once it has room, so none is taken that it cannot serve.
        io_.poll(in_flight_, tag(Op::AcceptReady), uring::FileRef::plain(fd_.get()), POLLIN);
        armed_ = true;
        armed_op_ = Op::AcceptReady;
        return;
    }
    if (direct_) {
        // One accept at a time, each with the peer's address: a multishot accept has
        // nowhere to write one per connection. The shard arms the next as soon as this
        // one completes (keep_accepting()).
        peer_.length = sizeof(peer_.storage);
        io_.accept_direct(in_flight_, tag(Op::Accept), fd_.get(), peer_.get(), &peer_.length);
    } else {
        io_.accept_multishot(in_flight_, tag(Op::Accept), fd_.get());
    }
    armed_ = true;
    armed_op_ = Op::Accept;
}

int Listener::on_accept(const uring::Completion& c, std::size_t open_connections) {
    if (!c.more()) {
        armed_ = false;
        cancel_pending_ = false;
        if (stopping_)
            fd_.reset(); // refuse new clients now, not when the shard ends
    }
    if (c.result >= 0) {
        // After release() the socket lives on in another process: a client taken by
        // the accept still in flight is ours to serve, or it would be refused.
        if (!stopping_ || released_)
            return c.result;
        if (direct_)
            io_.close_direct(in_flight_, tag(Op::ListenerCloseFile),
                             uring::FileRef::direct(c.result), /*reset=*/false);
        else
            ::close(c.result);
    } else if (c.result != -ECANCELED && !stopping_) {
        int err = -c.result;
        if (direct_ && err == ENFILE) {
            // -ENFILE from an accept into the table: no slot is free
            // (io_uring/filetable.c io_file_bitmap_get).
            bump(io_.counters().direct_table_full);
            pause_for_shortage(fmt::format("accept: the shard's registered file table is "
                                           "full ({} slots, [engine] direct_table_size)",
                                           io_.ring().file_table_slots()),
                               open_connections);
        } else if (is_fd_shortage(err)) {
            pause_for_fd_shortage("accept", err, open_connections);
        } else
            log_.warn("accept: {}", std::strerror(err));
    }
    return -1;
}

void Listener::set_one_at_a_time(bool on) {
    // accept(2) on a blocking socket would block the shard when another shard (or
    // process) took the client first, and a socket passed in is not ours to change
    // (config.hpp, inherited_listeners): such a listener keeps its multishot accept.
    if (on == one_at_a_time_ || direct_ || !nonblocking_)
        return;
    one_at_a_time_ = on;
    end_accept(); // armed anew, the other way, once it has ended
}

void Listener::on_ready(const uring::Completion& c) {
    armed_ = false;
    cancel_pending_ = false;
    if (stopping_)
        fd_.reset();
    else if (c.result < 0 && c.result != -ECANCELED)
        log_.warn("poll of a listening socket: {}", std::strerror(-c.result));
}

int Listener::accept_now(std::size_t open_connections) {
    int fd = ::accept4(fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        if (is_fd_shortage(err))
            pause_for_fd_shortage("accept", err, open_connections);
        else if (err != EAGAIN && err != EWOULDBLOCK && err != ECONNABORTED && err != EINTR)
            log_.warn("accept: {}", std::strerror(err));
        errno = err;
    }
    return fd;
}

void Listener::keep_accepting() {
    if (armed_ || stopping_ || paused_ || held_)
        return;
    if (pause_wanted_) {
        pause_wanted_ = false;
        paused_ = true;
        io_.timeout(in_flight_, tag(Op::AcceptPause), backoff_);
    } else {
        arm();
    }
}

void Listener::pause_for_fd_shortage(const char* what, int err, std::size_t open_connections) {
    pause_for_shortage(fmt::format("{}: {}", what, fd_shortage_cause(err)), open_connections);
}

void Listener::pause_for_shortage(const std::string& why, std::size_t open_connections) {
    bump(io_.counters().accept_backoffs);
    if (backoff_.count() == 0) {
        log_.warn("{} with {} connections open; pausing accepts, pending clients wait in the "
                  "backlog",
                  why, open_connections);
        backoff_ = kFirstAcceptBackoff;
    } else {
        backoff_ = std::min(backoff_ * 2, kMaxAcceptBackoff);
    }
    pause_wanted_ = true;
    // A multishot accept would keep taking clients we cannot serve (each needs a
    // second fd for its upstream): stop it; keep_accepting() pauses once it has ended.
    end_accept();
}

void Listener::end_accept() {
    if (armed_ && !cancel_pending_) {
        io_.cancel(in_flight_, tag(armed_op_), tag(Op::ListenerCancel));
        cancel_pending_ = true;
    }
}

void Listener::hold(HoldReason reason) {
    held_ |= reason;
    // Clients the accept still takes before the cancel lands wait in the shard.
    end_accept();
}

void Listener::release_hold(HoldReason reason) {
    held_ &= ~static_cast<unsigned>(reason);
    keep_accepting();
}

void Listener::shortage_over() {
    if (!pause_wanted_ && !paused_)
        backoff_ = std::chrono::milliseconds{0};
}

void Listener::on_pause_over() {
    paused_ = false;
    if (!stopping_ && !armed_)
        arm();
}

void Listener::move_to_route(uint32_t route, uint32_t group) {
    route_ = route;
    group_ = group;
    if (held_ & kRouteFull)
        release_hold(kRouteFull); // a new route starts with room (or holds it again)
}

void Listener::stop() {
    if (stopping_)
        return;
    stopping_ = true;
    // Refuse new clients now, not once the cancelled accept has come back: shutdown()
    // of a listening TCP socket disconnects it at once (net/ipv4/af_inet.c
    // inet_shutdown -> tcp_disconnect, which also leaves the SO_REUSEPORT group and
    // resets what waited in its queue), and a Unix one refuses connects from then on
    // (net/unix/af_unix.c unix_stream_connect checks RCV_SHUTDOWN). A dup'd Unix
    // listener is shut for every shard: they all stop it together.
    if (fd_)
        ::shutdown(fd_.get(), SHUT_RD);
    // A file our bind made goes with it (if the path still names our socket).
    file_.remove();
    if (armed_)
        io_.cancel(in_flight_, tag(armed_op_), tag(Op::ListenerCancel));
    else
        fd_.reset();
    if (paused_)
        io_.cancel(in_flight_, tag(Op::AcceptPause), tag(Op::ListenerCancel));
}

void Listener::release() {
    if (stopping_)
        return;
    stopping_ = true;
    released_ = true;
    // No shutdown(): on a TCP listener it disconnects the socket itself, for every
    // holder, resetting the clients queued in its backlog (see stop()). Closing our fd
    // only drops a reference; the socket and its queue stay with the other process,
    // and so does a Unix socket's file.
    file_.disown();
    if (armed_)
        io_.cancel(in_flight_, tag(armed_op_), tag(Op::ListenerCancel));
    else
        fd_.reset();
    if (paused_)
        io_.cancel(in_flight_, tag(Op::AcceptPause), tag(Op::ListenerCancel));
}

} // namespace uringfwd::engine
