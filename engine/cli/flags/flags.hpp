// The binary's command line: every flag, and how the flags given become an EngineConfig,
// alone or over a configuration file.
#pragma once

#include "uringfwd/config.hpp"
#include "uringfwd/config_file.hpp"
#include "uringfwd/operations.hpp"

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace uringfwd::cli {

// Logs MESSAGE as one error line (process_log.hpp) and exits with status 1.
[[noreturn]] void fail(const std::string& message);

// A default of EngineConfig as a duration flag writes it ("5s").
template <typename Duration> std::string default_duration(Duration d) {
    return format_duration(std::chrono::duration_cast<std::chrono::microseconds>(d));
}

// The flags as parsed. Defaults come from EngineConfig so the two cannot drift apart;
// whether a flag was given at all is asked of the CLI::App, since only a given flag may
// override the configuration file.
struct Flags {
    std::string config_path;
    bool check = false;

    // Durations are strings in the configuration file's syntax ("250ms", "5m", "0"),
    // read by add_duration()'s check and duration_flag().
    std::vector<std::string> listen;    // several: one route listening on each
    std::vector<std::string> upstreams; // several: a pool
    std::string connect_timeout = default_duration(EngineConfig{}.connect_timeout);
    std::string balance = "round-robin";
    unsigned retries = UpstreamPool{}.retries;
    std::string idle_timeout = "0";
    std::size_t max_connections = 0;
    bool dual_stack = false;
    bool accept_proxy = false;
    std::string trusted_sources; // CIDR,CIDR,...
    std::string allow;           // CIDR,CIDR,...
    std::string deny;            // CIDR,CIDR,...
    std::string send_proxy = "off";
    std::string inspect_timeout = default_duration(RouteConfig{}.inspect_timeout);

    std::size_t max_pipes = EngineConfig{}.splice.max_pipes;
    std::size_t pipe_size = EngineConfig{}.splice.pipe_size;
    std::string log_level = "info";
    std::size_t shards = EngineConfig{}.placement.shards;
    std::string cpus;
    std::string numa_nodes;
    bool no_steering = false;
    std::string iowq_cpus = "cpu";
    unsigned iowq_max_workers = EngineConfig{}.placement.iowq_max_workers;
    std::string data_path = "auto";
    std::string splice_mechanism = "auto";
    std::string direct_descriptors = "auto";
    unsigned copy_buffers = EngineConfig{}.copy.copy_buffers;
    std::size_t copy_buffer_size = EngineConfig{}.copy.copy_buffer_size;
    unsigned bulk_buffers = EngineConfig{}.copy.bulk_buffers;
    std::size_t bulk_buffer_size = EngineConfig{}.copy.bulk_buffer_size;
    std::string busy_poll = default_duration(EngineConfig{}.ring.busy_poll);
    std::string bulk_coalesce = default_duration(EngineConfig{}.splice.bulk_coalesce);
    std::string bulk_park = default_duration(EngineConfig{}.experimental.bulk_park);
    std::string drain_timeout = default_duration(EngineConfig{}.drain_timeout);

    std::string metrics;
    std::string access_log;
    std::string access_log_format = "text";
    std::string access_log_flush = default_duration(OperationsConfig{}.access_log_flush);
    std::string upgrade_socket;
    std::string handover;
    std::string control;
};

// Declares every flag on `app`, each writing into `flags`.
void add_flags(CLI::App& app, Flags& flags);

// After parsing, without --config: the one route of --listen/--upstream and the
// engine-wide flags. Bad values and missing flags end the program with fail().
EngineConfig config_from_flags(const CLI::App& app, const Flags& flags);

// After parsing, with --config: rejects the flags the file replaces, then writes each
// engine-wide flag that was given over the file's value in `config`.
void apply_flags_over_file(const CLI::App& app, const Flags& flags, EngineConfig& config);

// After parsing: --metrics, --access-log, --access-log-format, --access-log-flush,
// --upgrade-socket and --control (cli/control/control_flag.hpp), each only when given,
// over `operations` (the file's [engine] values, or the defaults without --config).
void apply_operation_flags(const CLI::App& app, const Flags& flags, OperationsConfig& operations);

} // namespace uringfwd::cli
