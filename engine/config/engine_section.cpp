#include "config/engine_section.hpp"

#include "config/access_keys.hpp"
#include "config/table_reader.hpp"
#include "support/quote_input.hpp"
#include "uringfwd/cpu_list.hpp"
#include "uringfwd/operations.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace uringfwd::config {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using namespace std::chrono_literals;

// A cpulist value (cpus, numa_nodes); nullopt after recording the parser's message.
std::optional<std::vector<int>> cpu_list(TableReader& reader, std::string_view key) {
    const auto text = reader.string(key);
    if (!text)
        return std::nullopt;
    try {
        return parse_cpu_list(*text);
    } catch (const std::invalid_argument& e) {
        reader.error(line_of(*reader.get(key)), fmt::format("{}: {}", key, e.what()));
        return std::nullopt;
    }
}

// cpus and numa_nodes together, as the binary's --cpus and --numa-node: the CPUs of the
// nodes, limited to `cpus` when both are given. EngineConfig holds CPUs only, so the
// nodes are resolved here, against the topology of the machine that parses the file.
void read_cpus(TableReader& reader, const TopologyReader& read_topology, EngineConfig& config) {
    const auto cpus = cpu_list(reader, "cpus");
    if (cpus)
        config.placement.cpus = *cpus;
    const auto nodes = cpu_list(reader, "numa_nodes");
    if (!nodes || nodes->empty())
        return;
    const std::size_t line = line_of(*reader.get("numa_nodes"));
    std::vector<int> from_nodes;
    try {
        const NumaTopology topology = read_topology ? read_topology() : read_numa_topology();
        from_nodes = topology.cpus_of_nodes(*nodes);
    } catch (const std::exception& e) {
        reader.error(line, fmt::format("numa_nodes: {}", e.what()));
        return;
    }
    if (from_nodes.empty()) {
        // An empty list would mean "every CPU", the opposite of what was asked for.
        reader.error(line, fmt::format("numa_nodes {} have no online CPU",
                                       quote_input(format_cpu_list(*nodes))));
        return;
    }
    if (!cpus || cpus->empty()) {
        config.placement.cpus = from_nodes;
        return;
    }
    std::vector<int> both;
    std::set_intersection(cpus->begin(), cpus->end(), from_nodes.begin(), from_nodes.end(),
                          std::back_inserter(both));
    if (both.empty()) {
        reader.error(line, fmt::format("cpus {} and numa_nodes {} have no CPU in common",
                                       quote_input(format_cpu_list(*cpus)),
                                       quote_input(format_cpu_list(*nodes))));
        return;
    }
    config.placement.cpus = both;
}

bool power_of_two_buffers(int64_t n) {
    // The kernel's provided-buffer ring takes a power of two up to 32768 entries.
    return n >= 1 && n <= 32768 && (n & (n - 1)) == 0;
}

bool bulk_buffers_ok(int64_t n) {
    // At most kMaxChunks (engine/shard/directions/direction_logic.hpp): what a direction can hold.
    return n == 0 || (n <= 16 && power_of_two_buffers(n));
}

bool pipe_size_ok(int64_t n) {
    return n == 0 || (n >= 4096 && n <= (int64_t{1} << 30));
}

// metrics = "HOST:PORT": a TCP address (the exposer is an HTTP server).
void read_metrics(TableReader& reader, OperationsConfig& operations) {
    const auto text = reader.string("metrics");
    if (!text || text->empty())
        return;
    try {
        Endpoint e = Endpoint::parse(*text);
        if (e.is_unix())
            throw std::invalid_argument("it must be a TCP address (HOST:PORT), not a Unix socket");
        operations.metrics = e;
    } catch (const std::invalid_argument& e) {
        reader.error(line_of(*reader.get("metrics")),
                     fmt::format("metrics {}: {}", quote_input(*text), e.what()));
    }
}

} // namespace

void read_engine_section(const toml::table& table, const TopologyReader& read_topology,
                         ErrorList& errors, EngineConfig& config, OperationsConfig& operations) {
    TableReader reader(table, errors, "", "[engine] ", "in [engine]");

    if (const auto v = reader.integer("shards", 0, kMaxCpu + 1))
        config.placement.shards = static_cast<std::size_t>(*v);
    read_cpus(reader, read_topology, config);
    if (const auto v = reader.boolean("steering"))
        config.placement.steer_by_cpu = *v;
    if (const auto v = reader.one_of("iowq_cpus", {"cpu", "node"}))
        config.placement.worker_placement =
            *v == "node" ? WorkerPlacement::ShardNode : WorkerPlacement::ShardCpu;
    if (const auto v = reader.integer("iowq_max_workers", 0, 65536))
        config.placement.iowq_max_workers = static_cast<unsigned>(*v);
    if (const auto v = reader.one_of("data_path", {"splice", "copy", "auto"}))
        config.data_path = *parse_data_path(*v);
    if (const auto v = reader.one_of("splice_mechanism", {"auto", "ring", "inline"}))
        config.splice.splice_mechanism = *parse_splice_mechanism(*v);
    if (const auto v = reader.one_of("direct_descriptors", {"auto", "on", "off"}))
        config.ring.direct_descriptors = *parse_direct_descriptors(*v);
    if (const auto v = reader.integer("direct_table_size", 0, 1 << 20))
        config.ring.direct_table_size = static_cast<unsigned>(*v);
    if (const auto v = reader.integer("max_pipes", 1, 1 << 20))
        config.splice.max_pipes = static_cast<std::size_t>(*v);
    if (const auto v = reader.integer_that(
            "pipe_size", "0 (the system's pipe-max-size) or 4096..1073741824", pipe_size_ok))
        config.splice.pipe_size = static_cast<std::size_t>(*v);
    if (const auto v =
            reader.integer_that("copy_buffers", "a power of two 1..32768", power_of_two_buffers))
        config.copy.copy_buffers = static_cast<unsigned>(*v);
    if (const auto v = reader.integer("copy_buffer_size", 1024, 16 << 20))
        config.copy.copy_buffer_size = static_cast<std::size_t>(*v);
    if (const auto v =
            reader.integer_that("bulk_buffers", "0 or a power of two 1..16", bulk_buffers_ok))
        config.copy.bulk_buffers = static_cast<unsigned>(*v);
    if (const auto v = reader.integer("bulk_buffer_size", 4096, 16 << 20))
        config.copy.bulk_buffer_size = static_cast<std::size_t>(*v);
    if (const auto v = reader.duration("busy_poll", 0us, microseconds{1s}, true))
        config.ring.busy_poll = *v;
    if (const auto v = reader.duration("bulk_coalesce", 0us, microseconds{100ms}, true))
        config.splice.bulk_coalesce = *v;
    if (const auto v = reader.duration("bulk_park", 0us, microseconds{1s}))
        config.experimental.bulk_park = std::chrono::duration_cast<milliseconds>(*v);
    if (const auto v = reader.duration("drain_timeout", 0us, microseconds{24h}))
        config.drain_timeout = std::chrono::duration_cast<milliseconds>(*v);
    if (const auto v = reader.integer("rebalance_above", 0, 1 << 30))
        config.rebalance_above = static_cast<std::size_t>(*v);
    if (const auto v = reader.string("upgrade_socket")) {
        if (!is_upgrade_socket_path(*v))
            reader.error(line_of(*reader.get("upgrade_socket")),
                         fmt::format("upgrade_socket must be {}, not {}", kUpgradeSocketPath,
                                     quote_input(*v)));
        else
            operations.upgrade_socket = *v;
    }
    if (const auto v = reader.string("control")) {
        if (!is_upgrade_socket_path(*v))
            reader.error(
                line_of(*reader.get("control")),
                fmt::format("control must be {}, not {}", kUpgradeSocketPath, quote_input(*v)));
        else
            operations.control = *v;
    }
    if (const auto v = reader.file_mode("control_mode"))
        operations.control_mode = *v;
    if (const auto v = reader.string("control_group")) {
        if (v->empty())
            reader.wrong("control_group", *reader.get("control_group"),
                         "a group name, or a number");
        else
            operations.control_group = *v;
    }
    if (const auto v = reader.one_of("log_level", {"error", "warn", "info", "debug"}))
        config.log_level = *parse_log_level(*v);
    read_engine_access(reader, config.access);
    read_metrics(reader, operations);
    if (const auto v = reader.string("access_log"))
        operations.access_log = *v;
    if (const auto v = reader.one_of("handover", {"connections", "listeners"}))
        operations.handover =
            *v == "listeners" ? UpgradeHandover::Listeners : UpgradeHandover::Connections;
    if (const auto v = reader.one_of("access_log_format", {"text", "json"}))
        operations.access_log_format = *parse_access_log_format(*v);
    if (const auto v = reader.duration("access_log_flush", microseconds{1ms}, microseconds{1h}))
        operations.access_log_flush = std::chrono::duration_cast<milliseconds>(*v);

    reader.report_unknown_keys();
}

} // namespace uringfwd::config
