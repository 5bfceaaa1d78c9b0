// Everything an Engine needs to know before it starts.
#pragma once

#include "uringfwd/endpoint.hpp"
#include "uringfwd/log.hpp"
#include "uringfwd/observer.hpp"
#include "uringfwd/route.hpp"

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace uringfwd {

// How bytes move from one socket to the other.
enum class DataPath {
    // socket -> pipe -> socket with splice: no copy, but every splice runs on an io-wq
    // kernel thread (docs/kernel.md §1), a hop that costs latency.
    Splice,
    // receive into a provided buffer, then send: two copies, but both run inline on
    // the shard's thread with no io-wq hop.
    Copy,
    // Per direction: copy small or latency-bound traffic, splice bulk traffic. A
    // direction starts copying; two full buffers in a row move it to splice, and two
    // small splice reads in a row (each below min(64 KiB, half the pipe)) move it back.
    Auto,
};
std::string_view to_string(DataPath path);
std::optional<DataPath> parse_data_path(std::string_view text); // "splice", "copy", "auto"

// How a splicing direction runs its splices (docs/kernel.md §1.9).
enum class SpliceMechanism {
    // Inline wherever it can be had: without bulk_park (which makes sockets blocking),
    // and, for sockets in slots of the file table, once a plain fd could be installed
    // for them; the ring's chain otherwise. Inline measured cheaper on every bulk
    // workload of bench/compare (docs/bulk-experiments.md, issue 19).
    Auto,
    // IORING_OP_SPLICE, socket -> pipe hard-linked to pipe -> socket: every pair runs
    // on an io-wq kernel worker, a hop of 10-15 us (docs/kernel.md §1.1, §1.7).
    Ring,
    // Readiness from the ring (a one-shot poll), then non-blocking splice(2) on the
    // shard's own thread, socket -> pipe -> socket, repeated while the source has data
    // and the destination takes it, within a budget per wake-up: no kernel worker.
    Inline,
};
std::string_view to_string(SpliceMechanism mechanism);
std::optional<SpliceMechanism> parse_splice_mechanism(std::string_view text); // auto|ring|inline

// Registered ("direct") descriptors: sockets live in slots of each shard's io_uring
// file table instead of the process's fd table (docs/kernel.md §11). Each operation
// then skips a file-table lookup, and a shard may hold as many sockets as its table
// has slots, beyond what RLIMIT_NOFILE allows plain fds.
enum class DirectDescriptors {
    // Used where this kernel has every piece (6.7 for setsockopt through the ring),
    // else plain fds, with one info line.
    Auto,
    // Used, or the engine refuses to start, saying what the kernel lacks.
    On,
    // Plain fds.
    Off,
};
std::string_view to_string(DirectDescriptors mode);
std::optional<DirectDescriptors> parse_direct_descriptors(std::string_view text); // auto|on|off

// Where each shard's io-wq kernel workers may run: on the shard's own CPU (a splice
// finishing on another CPU costs 2.3-2.9x, docs/kernel.md §9) or anywhere on its node.
// ShardNode is a request: from Linux 6.2 a worker also keeps the affinity its pinned
// shard thread asked for, so there the workers stay on the shard's CPU, and the start
// log says so in a warning (docs/kernel.md §9).
enum class WorkerPlacement { ShardCpu, ShardNode };

// Every field keeps the name it had before the fields were grouped (0.2.0): only the
// group in front of it is new (config.max_pipes is config.splice.max_pipes).
struct EngineConfig {
    // What every embedder sets: what to serve, and how bytes move.

    // What the engine serves. Empty: one route named "default" from the three fields
    // below (the binary's --listen/--upstream build the same thing). With routes, listen
    // and upstream must be left unset (validate() refuses them: they would be ignored).
    std::vector<RouteConfig> routes;

    Endpoint listen;   // where clients connect
    Endpoint upstream; // where their bytes go
    // An upstream that has not accepted the connection by then is given up on and the
    // client is reset.
    std::chrono::milliseconds connect_timeout{5000};

    // On stop(), connections still open after this long are reset.
    std::chrono::milliseconds drain_timeout{30000};

    // Automatic rebalancing (docs/handover.md "Between shards"): once a second, when the
    // busiest shard holds more than this many connections above the least busy one,
    // Engine::rebalance() evens them out. 0: off (rebalance() on request only).
    std::size_t rebalance_above = 0;

    DataPath data_path = DataPath::Auto;

    // Sees every connection open and close (see observer.hpp); null: nobody, and the
    // engine then spends nothing on it.
    std::shared_ptr<ConnectionObserver> observer;

    LogLevel log_level = LogLevel::Info;
    LogSink log_sink; // empty = stderr

    // Where the shards and their kernel workers run.
    struct Placement {
        // Shards: one thread per CPU, pinned, each with its own ring, listener
        // (SO_REUSEPORT), pipes and connections. `cpus` lists the CPUs to use (empty =
        // every CPU this process may run on, so taskset and cpusets are honoured);
        // `shards` takes the first N of them (0 = all).
        std::vector<int> cpus;
        std::size_t shards = 0;

        // Serve each connection on the shard of the CPU whose network stack received
        // its SYN (SO_INCOMING_CPU and a reuseport BPF program). Off = the kernel's hash.
        bool steer_by_cpu = true;

        // Where each shard's io-wq workers may run (see WorkerPlacement).
        WorkerPlacement worker_placement = WorkerPlacement::ShardCpu;

        // Most io-wq workers (kernel threads running the splices) per shard; 0 =
        // max_pipes + 4, enough that no splice ever waits for a worker. Every splice is
        // non-blocking, so a smaller cap only queues work, it cannot starve it; workers
        // confined to one CPU gain nothing from numbers but context switches.
        unsigned iowq_max_workers = 0;
    } placement;

    // Each shard's io_uring: its size, how it waits, and where its sockets live.
    struct Ring {
        // io_uring submission queue entries per shard.
        unsigned ring_entries = 4096;

        // Opt-in low latency: a shard with nothing to do polls its ring for up to this
        // long before it sleeps, so a message arriving meanwhile is handled without
        // waking the CPU. Costs CPU (up to this much per burst of work); 0 = off.
        std::chrono::microseconds busy_poll{0};

        // Direct descriptors (see DirectDescriptors). Connections handed over by
        // forward()/forward_pair(), listeners on a wildcard address, and a bulk_park
        // source keep plain fds in any mode (README, "Direct descriptors").
        DirectDescriptors direct_descriptors = DirectDescriptors::Auto;
        // Slots in each shard's file table; every connection takes two. 0: the soft
        // RLIMIT_NOFILE at start (the most the kernel registers), at most 131072. A size
        // above the soft limit cannot be registered (auto then uses plain fds).
        unsigned direct_table_size = 0;
    } ring;

    // The splice path (data_path Splice, and Auto's bulk directions): its pipes and
    // how its splices run.
    struct Splice {
        // Upper bound on pipes per shard (idle + leased). When all are leased, a
        // direction that has data waits for one (backpressure) instead of failing.
        std::size_t max_pipes = 128;

        // Pipe capacity to ask for; 0 = /proc/sys/fs/pipe-max-size. The pool asks for
        // less when the kernel refuses (per-user pipe budget).
        std::size_t pipe_size = 0;

        // How splices run (see SpliceMechanism); Inline cannot be had with
        // experimental.bulk_park.
        SpliceMechanism splice_mechanism = SpliceMechanism::Auto;

        // Inline splices, bulk directions: one whose wake-ups move bulk on average (at
        // least min(64 KiB, half a pipe)) and whose latest moved 16 KiB or more but less
        // than half a pipe, because the shard came quicker than the data, splices again
        // after this long (the shard's next tick, shared by all such directions) instead
        // of at the next byte. Fewer, fuller splices per GB, and one steady cost instead
        // of two (docs/bulk-experiments.md, issue 19); a bulk stream's bytes wait up to
        // this long, messages never. 0 = off.
        std::chrono::microseconds bulk_coalesce{250};
    } splice;

    // The copy path (data_path Copy, and Auto's small or latency-bound directions): its
    // provided buffers.
    struct Copy {
        // Buffers per shard (a power of two) and their size. A copying direction holds
        // at most two (one being sent, one received meanwhile) and none while idle.
        unsigned copy_buffers = 128;
        std::size_t copy_buffer_size = 32 * 1024;
        // Bulk directions (data_path Copy only): a second group of large buffers per
        // shard (a power of two up to 16, 0 = none) that a direction receives into once
        // it has filled two small buffers in a row, with receive bundles where the
        // kernel has them (6.10). A bulk direction stops receiving while it holds 8.
        unsigned bulk_buffers = 16;
        std::size_t bulk_buffer_size = 256 * 1024;
    } copy;

    // Off by default until measured; may change or go away in any release.
    struct Experimental {
        // Issue 14: a direction that turns bulk makes its source socket blocking with
        // SO_RCVTIMEO/SO_SNDTIMEO of this much, so its socket->pipe splice waits in the
        // kernel for data on its io-wq worker instead of returning EAGAIN and being
        // gated by a poll (what a blocking splice loop does, inside io_uring;
        // docs/kernel.md §1.8). A direction idle for this long goes back to poll
        // gating. 0 = off.
        std::chrono::milliseconds bulk_park{0};
    } experimental;

    // Who may connect, for routes that set neither allow nor deny of their own
    // (RouteConfig::allow, deny: CIDR ranges), and the bound of the per-source table.
    struct Access {
        std::vector<std::string> allow;
        std::vector<std::string> deny;
        // Entries of the one table every shard counts per-source limits in (routes
        // with max_connections_per_source or connection_rate_per_source), allocated
        // when a route first asks for it, about 80 bytes each (5 MiB at the default),
        // kept across reloads. A flood of distinct sources cannot grow it: a new source
        // takes the place of an idle one (counted as an eviction: it starts again with
        // a full bucket), and when only sources with connections open are left in its
        // bucket it is let in untracked (counted). Rounded up to a multiple of 8.
        std::size_t source_table_size = 65536;
        static constexpr std::size_t kMinSourceTableSize = 8;
        static constexpr std::size_t kMaxSourceTableSize = std::size_t{1} << 24; // 1.3 GiB
    } access;

    // Listening sockets made by someone else (systemd socket activation, the previous
    // process of a binary upgrade): what the binary fills in, most embedders never.
    struct Inherited {
        // Adopted instead of binding: each is matched to the route listen address it is
        // bound to (getsockname). The engine dups them at start and never changes them;
        // the caller still owns and closes its own fds. Per address there may be one
        // socket, which every shard accepts on, or one per shard (an SO_REUSEPORT
        // group, as Engine::listener_fds() hands them out), shard i taking the i-th; any
        // other count fails the start. A socket that matches no listen address is
        // logged and ignored (unless serve_every_inherited); an address no socket
        // matches is bound as usual. Used at start only, not by reconfigure().
        // docs/service.md.
        std::vector<int> inherited_listeners;
        // Every inherited socket must match a listen address: start() fails, naming the
        // addresses that match none, before anything is bound. For a binary upgrade,
        // where the old process stops accepting on every socket it handed over once we
        // start: a socket we did not serve would refuse its clients from then on, so we
        // must refuse the take-over and leave it serving instead. Off: such sockets are
        // logged and ignored (socket activation's rule).
        bool serve_every_inherited = false;
    } inherited;
};

// Every problem of `config` that would make Engine::start() refuse it before anything
// is bound (settings that contradict each other, sizes the kernel cannot take; a route
// without listen address or member, a trusted_sources entry that is no CIDR range, a
// member listed twice), one line each; empty when there is none. Engine::start() calls
// it, and reconfigure() refuses the routes' lines. Addresses, users and groups are not
// looked up here, nor what the kernel offers probed: start() finds those out.
std::vector<std::string> validate(const EngineConfig& config);

} // namespace uringfwd
