// The Prometheus metric families of a running engine, built from snapshots the public
// API gives (Engine::shard_stats(), route_stats(), member_health(), source_table_stats())
// when a scrape asks:
// nothing is counted for metrics' sake on the data path, the shards keep owning their
// counters. Names follow Prometheus' conventions: the uringfwd_ prefix, _total on
// counters, base units (_bytes, _seconds).
#pragma once

#include "uringfwd/engine.hpp"

#include <prometheus/metric_family.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace uringfwd::ops {

struct MetricsSnapshot {
    std::vector<ShardStats> shards;
    std::vector<RouteStats> routes;
    std::vector<MemberHealth> health;
    SourceTableStats sources; // capacity 0: no per-source table, no families
    bool access_log = false;  // an access log is on: its two counters below
    uint64_t access_log_lines = 0;
    uint64_t access_log_dropped = 0;
};

std::vector<prometheus::MetricFamily> metric_families(const MetricsSnapshot& snapshot);

// The family name of a per-shard counter of the counter list: "bytes_to_upstream"
// (Counter) -> "uringfwd_shard_to_upstream_bytes_total", "pipes_leased" (Gauge) ->
// "uringfwd_shard_pipes_leased". A name that starts with "bytes_" counts bytes: the
// unit moves to the end, as the conventions want.
std::string shard_metric_name(std::string_view counter, CounterKind kind);

} // namespace uringfwd::ops
