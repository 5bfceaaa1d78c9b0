// The engine flags: shards and placement, pipes, the data path, buffers, polling and
// the drain; each given one overrides the configuration file's [engine] value.
#include "cli/flags/duration_flag.hpp"
#include "cli/flags/flag_groups.hpp"
#include "cli/flags/flag_values.hpp"

#include <fmt/format.h>

namespace uringfwd::cli {

void add_engine_flags(CLI::App& app, Flags& flags) {
    app.add_option("--max-pipes", flags.max_pipes,
                   "pipes per shard at most; a direction that finds none waits for one")
        ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20))
        ->capture_default_str();
    app.add_option("--pipe-size", flags.pipe_size,
                   "pipe capacity to ask for in bytes (default: /proc/sys/fs/pipe-max-size)")
        ->check(CLI::Range(std::size_t{4096}, std::size_t{1} << 30));
    app.add_option("--log-level", flags.log_level, "error, warn, info or debug")
        ->capture_default_str();
    app.add_option("--shards", flags.shards,
                   "number of shards, one thread pinned per CPU (default: one per CPU allowed)");
    app.add_option("--cpus", flags.cpus, "CPUs to run shards on, e.g. 0-7,16-23");
    app.add_option("--numa-node", flags.numa_nodes,
                   "run shards only on these NUMA nodes' CPUs, e.g. 0");
    app.add_flag("--no-steering", flags.no_steering,
                 "spread connections by the kernel's hash, not by the CPU that received them");
    app.add_option("--iowq-cpus", flags.iowq_cpus,
                   "where a shard's io-wq workers run: cpu (its own) or node (its NUMA node; "
                   "Linux 6.2 and later keep them on its CPU, with a warning)")
        ->check(CLI::IsMember({"cpu", "node"}))
        ->capture_default_str();
    app.add_option("--iowq-max-workers", flags.iowq_max_workers,
                   "most io-wq kernel threads per shard (default: max-pipes + 4)")
        ->check(CLI::Range(1u, 1u << 16));
    app.add_option("--data-path", flags.data_path,
                   "how bytes move: splice (zero-copy, via io-wq kernel threads), copy "
                   "(receive + send, inline) or auto (per direction: copy small messages, "
                   "splice bulk)")
        ->check(CLI::IsMember({"splice", "copy", "auto"}))
        ->capture_default_str();
    app.add_option("--splice-mechanism", flags.splice_mechanism,
                   "how splices run: inline (non-blocking splice(2) on the shard's thread "
                   "once the ring reports the socket ready), ring (IORING_OP_SPLICE pairs, "
                   "each on an io-wq kernel thread) or auto (inline where it can be had)")
        ->check(CLI::IsMember({"auto", "ring", "inline"}))
        ->capture_default_str();
    app.add_option("--direct-descriptors", flags.direct_descriptors,
                   "sockets in each shard's io_uring file table instead of the process's fd "
                   "table: auto (where the kernel has every piece), on (refuse to start "
                   "without) or off")
        ->check(CLI::IsMember({"auto", "on", "off"}))
        ->capture_default_str();
    app.add_option("--copy-buffers", flags.copy_buffers,
                   "copy-path buffers per shard, a power of two; a copying direction "
                   "holds at most two, and none while idle")
        ->check(CLI::Range(1u, 32768u))
        ->capture_default_str();
    app.add_option("--copy-buffer-size", flags.copy_buffer_size,
                   "size of each copy-path buffer in bytes (1024..16777216)")
        ->check(CLI::Range(std::size_t{1024}, std::size_t{16} << 20))
        ->capture_default_str();
    app.add_option("--bulk-buffers", flags.bulk_buffers,
                   "data path copy: large buffers per shard for bulk directions, 0 or a "
                   "power of two up to 16 (0 = bulk directions keep the copy buffers)")
        ->check(CLI::IsMember({0u, 1u, 2u, 4u, 8u, 16u}))
        ->capture_default_str();
    app.add_option("--bulk-buffer-size", flags.bulk_buffer_size,
                   "size of each bulk buffer in bytes (4096..16777216)")
        ->check(CLI::Range(std::size_t{4096}, std::size_t{16} << 20))
        ->capture_default_str();
    add_duration(app, "--busy-poll", flags.busy_poll,
                 "low-latency mode: poll for up to this long before sleeping (50us, 1ms; at "
                 "most 1s); costs CPU; 0 = off",
                 kBusyPoll);
    add_duration(app, "--bulk-coalesce", flags.bulk_coalesce,
                 "inline splices: a bulk direction that woke for less than half a pipe "
                 "splices again after this long (500us; at most 100ms), with the shard's "
                 "other such directions, instead of at the next byte; 0 = off",
                 kBulkCoalesce);
    add_duration(app, "--bulk-park", flags.bulk_park,
                 "experimental: a bulk direction's splice waits in the kernel for data up to "
                 "this long (20ms; at most 1s) instead of being gated by a poll; 0 = off",
                 kBulkPark);
    add_duration(app, "--drain-timeout", flags.drain_timeout,
                 "on SIGTERM/SIGINT, let open connections finish this long (at most 24h); a "
                 "second signal resets them at once",
                 kDrainTimeout);
}

void apply_engine_flags(const CLI::App& app, const Flags& flags, EngineConfig& config) {
    const auto given = [&](const char* name) { return app.count(name) > 0; };
    if (given("--max-pipes"))
        config.splice.max_pipes = flags.max_pipes;
    if (given("--pipe-size"))
        config.splice.pipe_size = flags.pipe_size;
    if (given("--shards"))
        config.placement.shards = flags.shards;
    // Together they name the CPUs; either replaces the file's cpus and numa_nodes.
    if (given("--cpus") || given("--numa-node")) {
        config.placement.cpus =
            flags.cpus.empty() ? std::vector<int>{} : parse_cpus("--cpus", flags.cpus);
        if (!flags.numa_nodes.empty())
            config.placement.cpus = cpus_of_nodes(flags.numa_nodes, config.placement.cpus);
    }
    if (given("--no-steering"))
        config.placement.steer_by_cpu = !flags.no_steering;
    if (given("--iowq-cpus"))
        config.placement.worker_placement =
            flags.iowq_cpus == "node" ? WorkerPlacement::ShardNode : WorkerPlacement::ShardCpu;
    if (given("--iowq-max-workers"))
        config.placement.iowq_max_workers = flags.iowq_max_workers;
    if (given("--direct-descriptors"))
        config.ring.direct_descriptors = *parse_direct_descriptors(flags.direct_descriptors);
    if (given("--data-path"))
        config.data_path = *parse_data_path(flags.data_path); // checked by IsMember
    if (given("--splice-mechanism"))
        config.splice.splice_mechanism =
            *parse_splice_mechanism(flags.splice_mechanism); // IsMember
    if (given("--copy-buffers"))
        config.copy.copy_buffers = flags.copy_buffers;
    if (given("--copy-buffer-size"))
        config.copy.copy_buffer_size = flags.copy_buffer_size;
    if (given("--bulk-buffers"))
        config.copy.bulk_buffers = flags.bulk_buffers;
    if (given("--bulk-buffer-size"))
        config.copy.bulk_buffer_size = flags.bulk_buffer_size;
    if (given("--busy-poll"))
        config.ring.busy_poll =
            duration_flag<std::chrono::microseconds>(flags.busy_poll, kBusyPoll);
    if (given("--bulk-park"))
        config.experimental.bulk_park =
            duration_flag<std::chrono::milliseconds>(flags.bulk_park, kBulkPark);
    if (given("--bulk-coalesce"))
        config.splice.bulk_coalesce =
            duration_flag<std::chrono::microseconds>(flags.bulk_coalesce, kBulkCoalesce);
    if (given("--drain-timeout"))
        config.drain_timeout =
            duration_flag<std::chrono::milliseconds>(flags.drain_timeout, kDrainTimeout);
    if (given("--log-level")) {
        const auto level = parse_log_level(flags.log_level);
        if (!level)
            fail(fmt::format("--log-level: \"{}\" is not one of error, warn, info, debug",
                             flags.log_level));
        config.log_level = *level;
    }
}

} // namespace uringfwd::cli
