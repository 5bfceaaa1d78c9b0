// The public face of uring-fwd: start an engine, ask it what it does, stop it.
#pragma once

#include "uringfwd/config.hpp"
#include "uringfwd/handover.hpp"
#include "uringfwd/runtime.hpp"
#include "uringfwd/stats.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace uringfwd {

// Thrown by Engine::start() when the engine cannot run: the message is one line meant
// for an operator ("port in use", "io_uring unavailable: ...").
class StartError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// What Engine::reconfigure() did.
struct ReloadResult {
    // False when the new configuration was refused: `errors` says why (one line each)
    // and the engine goes on exactly as before.
    bool applied = false;
    std::vector<std::string> errors;
    // Settings that differ but cannot change while running (shards, CPUs, data path,
    // pipes, buffers, ...): left as they were; a restart applies them.
    std::vector<std::string> needs_restart;
};

// The active health check's view of one pool member (pools with a health_check).
struct MemberHealth {
    std::string route;
    std::string member; // its address as configured
    bool up = true;
    uint64_t checks = 0;      // checks run
    uint64_t failures = 0;    // checks failed
    uint64_t transitions = 0; // times it went down or came back up
};

// How many connections the engine makes room for, worked out at start from the fd
// limit (RLIMIT_NOFILE) as HAProxy derives maxconn from it: every connection on plain
// fds holds two, every pipe two, and the engine keeps some for itself. Clients beyond
// it wait in the listen backlog, as at a route's max_connections. With direct
// descriptors, sockets live in each shard's registered file table instead, two slots a
// connection.
struct ConnectionRoom {
    uint64_t fd_limit = 0;                 // the soft RLIMIT_NOFILE at start
    std::size_t connections = 0;           // on plain fds, all shards together
    std::size_t pipes_per_shard = 0;       // max_pipes, or fewer for the fds
    uint64_t reserved_fds = 0;             // open at start or kept for the engine's own
    bool direct = false;                   // the shards use direct descriptors
    std::size_t connections_per_shard = 0; // direct: what each shard's table holds
};

// One shard as it runs, for Engine::info(): what it was given and what the kernel let
// it have (the pipe size it got, a data path it fell back from, its file table).
struct ShardInfo {
    int cpu = -1;  // pinned to it
    int node = -1; // that CPU's NUMA node; -1: unknown (no topology)
    // What it really does: the configured path, or Splice when the copy path's buffers
    // could not be had under DataPath::Auto.
    DataPath data_path = DataPath::Auto;
    // The SpliceMechanism resolved: splices inline on the shard's thread, else on the ring.
    bool inline_splice = false;
    std::size_t pipe_size = 0; // bytes a pipe holds, as the kernel granted it
    std::size_t max_pipes = 0; // pipes at most (after the fd room: ConnectionRoom)
    // Copy path buffers: 0 when the shard has none (data path splice).
    unsigned copy_buffers = 0;
    std::size_t copy_buffer_size = 0;
    unsigned bulk_buffers = 0; // 0: none (only data path copy has them)
    std::size_t bulk_buffer_size = 0;
    // How connections are spread to it: "incoming cpu + bpf", "incoming cpu",
    // "reuseport hash", ... (its first listener's).
    std::string steering;
    std::chrono::microseconds busy_poll{0}; // 0: off
    std::string ring_features;              // the io_uring features in use, one line
    // Direct descriptors (DirectDescriptors): in use, with a file table of
    // `direct_slots`; or not, and `plain_fds_reason` says why (the configuration,
    // bulk_park, or what this kernel lacks).
    bool direct_descriptors = false;
    unsigned direct_slots = 0;
    std::string plain_fds_reason;
};

// One route as served, for Engine::info().
struct RouteInfo {
    std::string name;
    std::vector<Endpoint> listen;     // bound (port 0 resolved)
    std::vector<std::string> members; // its pool's members, as configured
    BalancePolicy balance = BalancePolicy::RoundRobin;
};

// What a running engine does, as a start-up log prints it (Engine::info()).
struct EngineInfo {
    std::vector<RouteInfo> routes; // in the configuration's order
    std::vector<ShardInfo> shards; // shard by shard
    ConnectionRoom room;           // the fd limit's room (Engine::connection_room())
};

// "listening on A, forwarding to B[ (route R, policy)]; ..." (the policy where there
// are several routes or members).
std::string describe_routes(const std::vector<RouteInfo>& routes);
// describe_routes() and "; N shards (node 0: N, ...)": what an engine serves, the start
// of Engine::describe().
std::string describe_serving(const EngineInfo& info);
// "cpu 0, data path auto, splices inline, pipes 1048576 bytes (at most 128), ...".
std::string describe(const ShardInfo& shard);

class Engine {
public:
    // Starts the shard threads, binds listeners and returns once they accept
    // connections. Throws StartError.
    //
    // Signals: ignore SIGPIPE in the process (signal(SIGPIPE, SIG_IGN)) before starting:
    // the engine's sends pass MSG_NOSIGNAL, but a splice into a socket whose peer has
    // gone raises SIGPIPE, which by default ends the process. The shard threads (and
    // the health-check and name threads) inherit the calling thread's signal mask:
    // block the signals you wait for with sigwait() before start(), as the binary
    // does, so that none of them lands on an engine thread.
    static std::unique_ptr<Engine> start(EngineConfig config);

    ~Engine(); // stops and joins if still running

    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    // The address actually bound (port 0 resolved to the real port): the first listen
    // address of the first route.
    Endpoint listen_endpoint() const;
    // Every address `route` listens on, bound (empty for an unknown route).
    std::vector<Endpoint> listen_endpoints(std::string_view route) const;

    // What it serves and how each shard runs (valid once start() has returned).
    EngineInfo info() const;
    // The same as one line, for a startup log: describe_serving(info()) and then
    // "; shard N: " describe(shard) for each shard.
    std::string describe() const;
    // The room the fd limit (or the file tables) leave for connections.
    ConnectionRoom connection_room() const;

    // Asks every shard to stop: listeners close at once (new clients are refused),
    // open connections may finish for `drain` (default: config.drain_timeout) and are
    // reset after that. stop(0ms) resets them at once; a later call may shorten the
    // drain. Thread-safe; returns immediately. Not async-signal-safe.
    void stop(std::optional<std::chrono::milliseconds> drain = std::nullopt);

    // For a binary upgrade: every listening socket of every shard, address by address
    // and, within one, shard by shard (the SO_REUSEPORT group's order). The engine
    // owns them; pass them on (SCM_RIGHTS) to a new engine's
    // EngineConfig::Inherited::inherited_listeners before calling release_listeners(). Empty
    // once released or stopping.
    std::vector<int> listener_fds() const;
    // Stops accepting without closing the listening sockets for anyone else: each
    // shard closes its own fd only, never shut down (which would reset what waits in
    // the accept queue, for the other process too), and a Unix socket's file stays.
    // Clients an accept already took are served. Open connections go on; call
    // stop() afterwards to drain them. Returns once every shard has let go.
    void release_listeners();
    // The other half, in the process that took the sockets over, once the old one's
    // release_listeners() has returned: every listener's accept is armed anew, which
    // first takes the clients already queued. The kernel wakes one exclusive waiter per
    // client (io_uring's accept polls with EPOLLEXCLUSIVE), and a wake-up that reached
    // the old process's accept while it was being cancelled is lost to us: without
    // this, such a client would wait until the next one arrives.
    void rearm_listeners();

    // Blocks until every shard has stopped.
    void wait();
    // True once every shard has stopped (wait() then returns at once).
    bool stopped() const;

    // Serves `config`'s routes from now on, without restarting: new connections use the
    // new routes and pools at once; open connections keep their upstream until they
    // end; listen addresses kept are not closed even for an instant, added ones are
    // bound, removed ones closed (their connections go on, as on stop()). Thread-safe;
    // returns once every shard has switched. Engine-wide settings are not changed.
    ReloadResult reconfigure(EngineConfig config);
    // The same for one route's pool: members, weights, policy, health, timeouts.
    // errors names an unknown route.
    ReloadResult update_pool(std::string_view route, UpstreamPool pool);

    // Hands over a client the application accepted itself, perhaps after reading a
    // preamble from it (a header, an authentication line, a peeked TLS ClientHello):
    // the shard of the calling CPU (else the least busy one) connects an upstream of
    // `route` as for its own listeners and sends `already_read` to it before anything
    // else the client sends. Thread-safe, from any thread. On success the engine owns
    // client_fd (it is made non-blocking, given TCP_NODELAY if it is TCP, and closed by
    // the engine); on error the caller keeps it (perhaps already non-blocking).
    // Errors: std::errc::invalid_argument (no route of that name),
    // std::errc::bad_file_descriptor (not an open stream socket),
    // std::errc::operation_canceled (the engine is stopping).
    std::error_code forward(int client_fd, std::string_view route,
                            std::span<const std::byte> already_read = {});
    // The same for a pair the application connected itself: no pool member is chosen;
    // the route's limits, idle timeout, counters and observer still apply. On success
    // the engine owns both fds (both made non-blocking, TCP ones given TCP_NODELAY);
    // what the client has sent by then is read at once and sent first.
    std::error_code forward_pair(int client_fd, int upstream_fd, std::string_view route);

    // An upgrade that keeps its connections (docs/handover.md). In the old engine, after
    // release_listeners(): begin_handover() has every shard detach each forwarding
    // connection as soon as it is quiet (nothing in flight but its reads; nothing held
    // in a pipe or buffer, or, with UnsentBytes::GoAlong, only bytes in a pipe that its
    // destination has not taken, which then go with it: DetachedConnection::unsent),
    // counted as closed_handed_over; take_detached() gives up to
    // `max` of them, waiting up to `wait` for the first. The caller owns what it takes:
    // pass the fds to the new engine (SCM_RIGHTS; DetachedConnection::fd_count(), with
    // any pipe's two ends), and give back any it refused with
    // adopt(). end_handover() stops detaching (the successor went away, or took them all)
    // and carries on here every connection detached but not taken, before a stopping
    // shard may end for want of connections; a stopping engine does not stop while a
    // hand-over is on (wait() waits for end_handover(); the destructor ends it itself,
    // closing what was detached and not taken). Connections still connecting or
    // inspecting are detached once they forward; one that never goes quiet stays (the
    // drain timeout ends it). open_connections(): how many the shards hold now.
    void begin_handover(UnsentBytes unsent = UnsentBytes::StayHere);
    HandoverEnd end_handover();
    std::vector<DetachedConnection> take_detached(std::size_t max, std::chrono::milliseconds wait);
    std::size_t open_connections() const;
    // The new engine's half: carries a detached connection on, in the shard of the CPU
    // its client's packets arrive on (else the least busy), from where the old engine
    // stopped; its route is found by name, its member by name (counted among the
    // member's connections), its bytes and times go on from what they were. Taken even
    // by a stopping engine (the old one takes back what the new one refused). On success
    // the engine owns the fds; on error `conn` keeps them: std::errc::invalid_argument
    // (no route of that name), bad_file_descriptor, operation_canceled (the engine ended).
    std::error_code adopt(DetachedConnection&& conn);

    // Counters summed over shards, and per shard. Cheap enough to poll every second.
    EngineStats stats() const;
    std::vector<ShardStats> shard_stats() const;
    // One entry per member of every pool that has a health_check, in route order.
    std::vector<MemberHealth> member_health() const;
    // Per route and per pool member, in the configuration's order, then the routes and
    // members a reconfigure() removed while connections drain on them. Each shard is asked
    // on its own thread (they share nothing); returns once each has answered, a wake-up
    // and a few microseconds per shard. Empty once the engine has stopped.
    std::vector<RouteStats> route_stats() const;
    // The per-source table's size and counts (routes with per-source limits). Reads
    // every bucket under its lock: cheap enough for a scrape, not for a tight loop.
    SourceTableStats source_table_stats() const;

    // Runtime control (uringfwd/runtime.hpp), without a reload. Thread-safe, from any
    // thread but a shard's own (an observer or a selector must not call them: each
    // waits for every shard); each returns once every shard has applied the change (or
    // answered). `member` is a member's key (UpstreamMember::name, or its address as
    // written) or, when no key matches, its address as written or resolved if one
    // member alone has it. A reload (reconfigure(), update_pool()) keeps a state and a
    // weight set here for the members still in the new configuration; a weight only
    // while the configuration's own weight for it stays what it was (a changed one
    // wins, as HAProxy's server-state file does it). Errors name what was not found
    // and what there is.
    //
    // Drain: no new connection goes to it (under every policy; Maglev passes it over as
    // a down member: its clients go to their next choice, and come back to it with
    // Ready); open connections go on. Maint: the same, and its active health checks
    // stop. Ready: back in, ramping up over the route's slow_start if it has one.
    ChangeResult set_member_state(std::string_view route, std::string_view member,
                                  MemberState state);
    // 1..1000, as in the configuration.
    ChangeResult set_member_weight(std::string_view route, std::string_view member,
                                   unsigned weight);
    // A new member for the route's pool, resolved on the caller's thread (a host name
    // may block), ramping up over slow_start. Gone at the next reload unless the new
    // configuration has it too.
    ChangeResult add_member(std::string_view route, UpstreamMember member);
    // The member takes no new connection; open ones keep it until they close (or, with
    // the route's on_member_down = Close, are reset). The last member cannot go.
    ChangeResult remove_member(std::string_view route, std::string_view member);
    // Every member of `route` (all routes when empty; unknown: none), in the
    // configuration's order.
    std::vector<MemberInfo> members(std::string_view route = {}) const;
    // The open connections, gathered on each shard's own thread, shard by shard; one
    // shard's are a snapshot of one moment (a connection on its way from one shard to
    // another, move_connection(), may be in neither). The filter's member is named as above
    // (with its route). Empty once the engine has stopped.
    std::vector<OpenConnection> connections(const ConnectionFilter& filter = {}) const;
    // Resets both sides of the connection (RST: SO_LINGER 0), counted as closed_admin;
    // the observer's record says CloseReason::Admin. Returns once its shard has begun
    // closing it; an error when no open connection has that id.
    ChangeResult close_connection(uint64_t id);
    // The same for every open connection of `route` (of one member of it when given):
    // how many were closed; none for an unknown or empty route or member.
    std::size_t close_connections(std::string_view route, std::string_view member = {});
    // Moves the open connection to shard `shard` (docs/handover.md "Between shards"),
    // by the steps of an upgrade's hand-over: once nothing of it is in flight (at once
    // for an idle one; a bulk stream's directions first deliver what they hold and take
    // no more meanwhile), its two sockets go to the other shard, which carries it on
    // where it stopped, with the same id and counts; its observer hears of it once, as
    // it ends. Returns once its shard has the request; the move follows (connections()
    // shows the shard), or is given up after `give_up_after` if the connection is never
    // quiet (counted as moves_given_up). An error for an unknown id or shard, a
    // connection not forwarding yet, or an engine that stops or hands its connections
    // over.
    ChangeResult move_connection(uint64_t id, unsigned shard,
                                 std::chrono::milliseconds give_up_after = std::chrono::seconds{5});
    // Evens out the shards: moves the fewest open connections after which no shard
    // holds more than one above another, each as move_connection() does (with its
    // default time limit). How many it asked to move.
    std::size_t rebalance();

    class Impl;

private:
    explicit Engine(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

} // namespace uringfwd
