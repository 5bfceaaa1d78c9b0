// One listening socket of a shard: a multishot accept, paused with a growing backoff
// while the process is out of file descriptors, held while a limit leaves no room, and
// closed on stop. Near the fd limit's room it accepts one client at a time instead
// (one_at_a_time()): a multishot accept takes every client of the backlog before the
// shard can stop it, each holding an fd. A shard may hold several; each has its own
// index, carried in its operations' tags.
#pragma once

#include "net/socket_address.hpp"
#include "net/sockets.hpp"
#include "net/unix_socket_file.hpp"
#include "shard/loop/shard_io.hpp"
#include "support/logger.hpp"
#include "uring/unique_fd.hpp"

#include <chrono>
#include <optional>
#include <string>

namespace uringfwd::engine {

struct ListenerSetup {
    uint32_t index = 0; // among the shard's listeners
    uint32_t route = 0; // the route it accepts clients for (its group's anchor)
    uint32_t group = 0; // its listen group in the route table
    SocketAddress address;
    ListenSocketOptions options; // for a socket it binds (not a shared or inherited one)
    int cpu = -1;                // the shard's CPU, for SO_INCOMING_CPU (-1: none)
    bool set_incoming_cpu = false;
    // The first shard of a TCP listener group attaches the steering program with this
    // base CPU.
    std::optional<int> steering_base;
    // Unix sockets have no SO_REUSEPORT: shards after the first accept on a dup of
    // the first shard's listener instead (the kernel wakes one waiter per connection).
    // An inherited listening socket (EngineConfig::Inherited::inherited_listeners) comes the same
    // way: the listener dups it rather than binding.
    int shared_fd = -1;
    // The shard uses direct descriptors: accept into slots of its file table, unless
    // the listener is bound to a wildcard address (see Listener::direct()).
    bool direct = false;
};

// Accepting (or opening a socket) fails with these when the process or system is out
// of file descriptors or memory; pending connections stay in the backlog, so pausing
// and retrying loses nothing.
bool is_fd_shortage(int err);
// Which limit such an error means, for log lines: EMFILE the process's RLIMIT_NOFILE,
// ENFILE the system's fs.file-max, ENOBUFS/ENOMEM kernel memory.
std::string fd_shortage_cause(int err);

// Why a listener holds off accepting: each a bit, released separately.
enum HoldReason : unsigned {
    kRouteFull = 1, // its route is at its max_connections
    kFdsFull = 2,   // the fd limit's connections are all taken (plain fds)
    kSlotsFull = 4, // the shard's file table's connections are all taken
};

class Listener {
public:
    // Binds (or dups the shared socket) and sets up steering. Throws
    // std::runtime_error with a one-line reason.
    Listener(ShardIo& io, const Logger& log, const ListenerSetup& setup);

    void start() { arm(); }

    // An Accept completion: returns the new client's fd (a slot of the file table when
    // direct()), or -1. Logs failures and,
    // on a shortage of fds, pauses itself (the log line names `open_connections`).
    // Call keep_accepting() after handling the client, which may itself call
    // pause_for_fd_shortage().
    int on_accept(const uring::Completion& c, std::size_t open_connections);
    void keep_accepting();
    void on_pause_over(); // the AcceptPause timer fired or was cancelled

    // The process is out of fds or memory (`what` failed with `err`): stop accepting
    // for a while; pending clients wait in the backlog. Backs off up to a second.
    void pause_for_fd_shortage(const char* what, int err, std::size_t open_connections);
    // The same with the reason spelled out (a full file table).
    void pause_for_shortage(const std::string& why, std::size_t open_connections);
    // A connection got its upstream socket: a shortage episode, if any, is over.
    void shortage_over();

    // A limit leaves no room for another client (`reason`): stop accepting (clients
    // wait in the backlog) until every reason held is released.
    void hold(HoldReason reason = kRouteFull);
    void release_hold(HoldReason reason = kRouteFull);

    // Accept one client at a time: a poll for a waiting client, then accept(2) once
    // the shard has room for it (accept_now()), instead of a multishot accept. Switched
    // at the next arming. Direct listeners always take one at a time; a blocking socket
    // (one passed in that way) keeps its multishot accept.
    void set_one_at_a_time(bool on);
    bool one_at_a_time() const { return one_at_a_time_; }
    // One at a time, and neither held, paused nor stopped: accept_now() may be called.
    bool may_accept() const {
        return one_at_a_time_ && held_ == 0 && !paused_ && !pause_wanted_ && !stopping_;
    }
    // An AcceptReady completion: a client waits (or the poll failed).
    void on_ready(const uring::Completion& c);
    // accept4(2) of one waiting client: its fd, or -1 with errno (EAGAIN when another
    // shard took it first, a shortage of fds: the listener pauses itself).
    int accept_now(std::size_t open_connections);

    // Stops accepting at once; the socket closes when the accept has ended, and a
    // Unix socket file our bind made is removed. For good: a stopped listener is never
    // started again.
    void stop();
    bool stopped() const { return stopping_; }
    // Stops accepting for good like stop(), but leaves the socket to whoever else
    // holds it (the next process of a binary upgrade): our fd is closed, the socket
    // never shut down, and a client the accept already took is still served.
    void release();
    // Ends the accept in flight, if any; the shard arms a new one when it has ended
    // (keep_accepting()), which first accepts whatever waits in the backlog.
    void rearm() { end_accept(); }

    // A reconfiguration moved this address to another route and group (their indexes):
    // clients accepted from now on are theirs (and its route's hold is released).
    void move_to_route(uint32_t route, uint32_t group);

    uint32_t index() const { return index_; }
    uint32_t route() const { return route_; }
    uint32_t group() const { return group_; }
    int fd() const { return fd_.get(); }
    // Names the socket across the shards that accept on it (a dup of shard 0's, an
    // inherited socket): its accept queue is one.
    uint64_t socket_inode() const { return socket_inode_; }
    SocketAddress bound() const { return bound_; }
    bool is_tcp() const { return bound_.family() != AF_UNIX; }
    // Whether its clients still need TCP_NODELAY set one by one: a TCP listener sets it
    // on itself, and an accepted socket is a copy of its listener (net/core/sock.c
    // sk_clone_lock), so it comes with the option set and costs no setsockopt.
    bool clients_need_no_delay() const { return is_tcp() && !clients_inherit_no_delay_; }
    // Clients come in slots of the shard's file table (direct descriptors), one accept
    // at a time with the peer's address written per accept; their local address is
    // bound(). A listener on a wildcard address (0.0.0.0, ::) accepts plain fds: its
    // clients' local address is known only to getsockname(2), which needs an fd
    // (io_uring gains a getsockname command only after 6.18: docs/kernel.md §11).
    bool direct() const { return direct_; }
    // The peer of the client the last Accept completion returned (direct() only).
    const SocketAddress& accepted_peer() const { return peer_; }
    // "incoming cpu + bpf" and the like, for the start-up line.
    const std::string& steering() const { return steering_; }
    InFlight& in_flight() { return in_flight_; }

private:
    void arm();
    void end_accept(); // cancels the multishot accept, if armed
    OpTag tag(Op op) const { return OpTag::for_listener(op, index_); }

    ShardIo& io_;
    const Logger& log_;
    uint32_t index_;
    uint32_t route_;
    uint32_t group_;
    uring::UniqueFd fd_;
    // The Unix socket file our bind made (the first shard's listener of a path; dups
    // and inherited sockets own none): removed on stop() or destruction, left on
    // release().
    OwnedSocketFile file_;
    SocketAddress bound_;
    uint64_t socket_inode_ = 0;
    std::string steering_ = "kernel hash";
    InFlight in_flight_;
    bool armed_ = false;
    Op armed_op_ = Op::Accept; // what is armed: the accept, or the poll (one at a time)
    bool paused_ = false;
    bool cancel_pending_ = false;
    bool pause_wanted_ = false; // pause once the multishot accept has ended
    unsigned held_ = 0;         // HoldReason bits
    bool one_at_a_time_ = false;
    bool nonblocking_ = true; // O_NONBLOCK: not so for some sockets passed in
    bool stopping_ = false;
    bool released_ = false; // stopped by release(): clients still accepted are served
    std::chrono::milliseconds backoff_{0};
    bool direct_ = false;
    bool clients_inherit_no_delay_ = false;
    SocketAddress peer_; // written by the accept in flight (direct_)
};

} // namespace uringfwd::engine
