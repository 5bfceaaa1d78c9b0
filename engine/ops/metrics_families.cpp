#include "ops/metrics_families.hpp"

#include "uringfwd/version.hpp"

#include <cstddef>
#include <limits>
#include <utility>

namespace uringfwd::ops {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;
using Labels = std::vector<ClientMetric::Label>;

MetricFamily family(std::string name, std::string help, MetricType type) {
    MetricFamily f;
    f.name = std::move(name);
    f.help = std::move(help);
    f.type = type;
    return f;
}

void add(MetricFamily& f, Labels labels, double value) {
    ClientMetric m;
    m.label = std::move(labels);
    if (f.type == MetricType::Counter)
        m.counter.value = value;
    else
        m.gauge.value = value;
    f.metric.push_back(std::move(m));
}

double num(uint64_t v) {
    return static_cast<double>(v);
}

// Buckets of microseconds -> a cumulative histogram in seconds. The count is the +Inf
// bucket's, so the two always agree even though the shard may be counting meanwhile.
void add_histogram(MetricFamily& f, Labels labels, const HistogramSnapshot& h) {
    ClientMetric m;
    m.label = std::move(labels);
    uint64_t cumulative = 0;
    for (std::size_t i = 0; i < h.counts.size(); ++i) {
        cumulative += h.counts[i];
        const double bound = i < h.bounds_us.size() ? num(h.bounds_us[i]) / 1e6
                                                    : std::numeric_limits<double>::infinity();
        m.histogram.bucket.push_back({cumulative, bound});
    }
    m.histogram.sample_count = cumulative;
    m.histogram.sample_sum = num(h.sum_us) / 1e6;
    f.metric.push_back(std::move(m));
}

// Per shard: every counter of the list (uringfwd/counter_list.hpp) but the close
// reasons, which become one family with a `reason` label.
void add_shard_families(const std::vector<ShardStats>& shards, std::vector<MetricFamily>& out) {
    const auto shard_label = [](const ShardStats& s) {
        return Labels{{"shard", std::to_string(s.shard)}};
    };
#define URINGFWD_SHARD_FAMILY(name, kind, help)                                                    \
    {                                                                                              \
        MetricFamily f = family(shard_metric_name(#name, CounterKind::kind), help,                 \
                                CounterKind::kind == CounterKind::Counter ? MetricType::Counter    \
                                                                          : MetricType::Gauge);    \
        for (const ShardStats& s : shards)                                                         \
            add(f, shard_label(s), num(s.counters.name));                                          \
        out.push_back(std::move(f));                                                               \
    }
    URINGFWD_PLAIN_COUNTERS(URINGFWD_SHARD_FAMILY)
#undef URINGFWD_SHARD_FAMILY

    MetricFamily closed = family("uringfwd_shard_connections_closed_total",
                                 "connections closed, by reason", MetricType::Counter);
    for (const ShardStats& s : shards) {
#define URINGFWD_SHARD_CLOSED(arg, enumerator, name, help)                                         \
    add(closed, {{"reason", #name}, {"shard", std::to_string(s.shard)}},                           \
        num(s.counters.closed(CloseReason::enumerator)));
        URINGFWD_CLOSE_REASONS(URINGFWD_SHARD_CLOSED, )
#undef URINGFWD_SHARD_CLOSED
    }
    out.push_back(std::move(closed));

    MetricFamily info =
        family("uringfwd_shard_info", "where each shard runs (value 1)", MetricType::Gauge);
    MetricFamily connect =
        family("uringfwd_upstream_connect_seconds",
               "time from accepting a client to its upstream connected", MetricType::Histogram);
    MetricFamily duration =
        family("uringfwd_connection_duration_seconds",
               "time from accepting a client to the connection's close", MetricType::Histogram);
    for (const ShardStats& s : shards) {
        add(info,
            {{"cpu", std::to_string(s.cpu)},
             {"node", std::to_string(s.node)},
             {"shard", std::to_string(s.shard)}},
            1);
        add_histogram(connect, shard_label(s), s.connect_time);
        add_histogram(duration, shard_label(s), s.duration);
    }
    out.push_back(std::move(info));
    out.push_back(std::move(connect));
    out.push_back(std::move(duration));
}

void add_route_families(const std::vector<RouteStats>& routes, std::vector<MetricFamily>& out) {
    MetricFamily accepted = family("uringfwd_route_connections_accepted_total",
                                   "clients accepted or handed over", MetricType::Counter);
    MetricFamily active =
        family("uringfwd_route_connections_active", "connections open now", MetricType::Gauge);
    MetricFamily waiting =
        family("uringfwd_route_connections_waiting",
               "clients waiting at the route's limit, in the listen backlog or accepted",
               MetricType::Gauge);
    MetricFamily closed = family("uringfwd_route_connections_closed_total",
                                 "connections closed, by reason", MetricType::Counter);
    MetricFamily bytes =
        family("uringfwd_route_forwarded_bytes_total",
               "bytes forwarded, by direction, counted as connections close", MetricType::Counter);
    MetricFamily m_active =
        family("uringfwd_upstream_connections_active",
               "connections to the member now, connecting included", MetricType::Gauge);
    MetricFamily m_connects = family("uringfwd_upstream_connects_total",
                                     "connects to the member that succeeded", MetricType::Counter);
    MetricFamily m_failures =
        family("uringfwd_upstream_connect_failures_total",
               "connects to the member that failed, by reason", MetricType::Counter);
    MetricFamily m_bytes = family("uringfwd_upstream_forwarded_bytes_total",
                                  "bytes forwarded on connections to the member, by direction, "
                                  "counted as connections close",
                                  MetricType::Counter);
    MetricFamily m_up =
        family("uringfwd_upstream_up", "1 when no shard has the member marked down, else 0",
               MetricType::Gauge);
    for (const RouteStats& r : routes) {
        const Labels route{{"route", r.name}};
        add(accepted, route, num(r.accepted));
        add(active, route, num(r.active));
        add(waiting, route, num(r.waiting));
        for (std::size_t i = 0; i < kCloseReasonCount; ++i)
            add(closed,
                {{"reason", std::string(to_string(static_cast<CloseReason>(i)))},
                 {"route", r.name}},
                num(r.closed[i]));
        add(bytes, {{"direction", "to_client"}, {"route", r.name}}, num(r.bytes_to_client));
        add(bytes, {{"direction", "to_upstream"}, {"route", r.name}}, num(r.bytes_to_upstream));
        for (const MemberStats& m : r.members) {
            const Labels member{{"route", r.name}, {"upstream", m.name}};
            add(m_active, member, num(m.active));
            add(m_connects, member, num(m.connects));
            for (std::size_t f = 0; f < kConnectFailureCount; ++f)
                add(m_failures,
                    {{"reason", std::string(to_string(static_cast<ConnectFailure>(f)))},
                     {"route", r.name},
                     {"upstream", m.name}},
                    num(m.connect_failures[f]));
            add(m_bytes, {{"direction", "to_client"}, {"route", r.name}, {"upstream", m.name}},
                num(m.bytes_to_client));
            add(m_bytes, {{"direction", "to_upstream"}, {"route", r.name}, {"upstream", m.name}},
                num(m.bytes_to_upstream));
            add(m_up, member, m.up ? 1 : 0);
        }
    }
    for (MetricFamily* f : {&accepted, &active, &waiting, &closed, &bytes, &m_active, &m_connects,
                            &m_failures, &m_bytes, &m_up})
        out.push_back(std::move(*f));
}

void add_health_families(const std::vector<MemberHealth>& health, std::vector<MetricFamily>& out) {
    if (health.empty())
        return;
    MetricFamily checks = family("uringfwd_upstream_health_checks_total",
                                 "active health checks run", MetricType::Counter);
    MetricFamily failures = family("uringfwd_upstream_health_check_failures_total",
                                   "active health checks failed", MetricType::Counter);
    MetricFamily up =
        family("uringfwd_upstream_health_check_up",
               "1 when the active health check has the member up, else 0", MetricType::Gauge);
    for (const MemberHealth& h : health) {
        const Labels member{{"route", h.route}, {"upstream", h.member}};
        add(checks, member, num(h.checks));
        add(failures, member, num(h.failures));
        add(up, member, h.up ? 1 : 0);
    }
    out.push_back(std::move(checks));
    out.push_back(std::move(failures));
    out.push_back(std::move(up));
}

// The engine-wide per-source table (per-source limits), once one exists.
void add_source_families(const SourceTableStats& sources, std::vector<MetricFamily>& out) {
    if (sources.capacity == 0)
        return;
    MetricFamily capacity = family("uringfwd_source_table_capacity",
                                   "entries of the per-source table: the most sources it "
                                   "tracks at once",
                                   MetricType::Gauge);
    add(capacity, {}, num(sources.capacity));
    MetricFamily tracked =
        family("uringfwd_source_table_tracked",
               "sources tracked now (connections open, or a rate bucket not full again)",
               MetricType::Gauge);
    add(tracked, {}, num(sources.tracked));
    MetricFamily evictions =
        family("uringfwd_source_table_evictions_total",
               "idle sources forgotten to make room for new ones", MetricType::Counter);
    add(evictions, {}, num(sources.evictions));
    MetricFamily untracked =
        family("uringfwd_source_table_untracked_total",
               "clients let in without per-source limits: their bucket of the table held only "
               "sources with connections open",
               MetricType::Counter);
    add(untracked, {}, num(sources.untracked));
    for (MetricFamily* f : {&capacity, &tracked, &evictions, &untracked})
        out.push_back(std::move(*f));
}

} // namespace

std::string shard_metric_name(std::string_view counter, CounterKind kind) {
    std::string name = "uringfwd_shard_";
    constexpr std::string_view kBytes = "bytes_";
    if (counter.substr(0, kBytes.size()) == kBytes) {
        name += counter.substr(kBytes.size());
        name += "_bytes";
    } else {
        name += counter;
    }
    if (kind == CounterKind::Counter)
        name += "_total";
    return name;
}

std::vector<MetricFamily> metric_families(const MetricsSnapshot& snapshot) {
    std::vector<MetricFamily> out;
    MetricFamily build =
        family("uringfwd_build_info", "the running version (value 1)", MetricType::Gauge);
    add(build, {{"version", std::string(version())}}, 1);
    out.push_back(std::move(build));
    add_shard_families(snapshot.shards, out);
    add_route_families(snapshot.routes, out);
    add_health_families(snapshot.health, out);
    add_source_families(snapshot.sources, out);
    if (snapshot.access_log) {
        MetricFamily lines =
            family("uringfwd_access_log_lines_total", "access log lines written or buffered to be",
                   MetricType::Counter);
        add(lines, {}, num(snapshot.access_log_lines));
        out.push_back(std::move(lines));
        MetricFamily dropped = family("uringfwd_access_log_dropped_total",
                                      "access log lines lost: a shard's buffer was full (the "
                                      "disk could not keep up) or a write failed",
                                      MetricType::Counter);
        add(dropped, {}, num(snapshot.access_log_dropped));
        out.push_back(std::move(dropped));
    }
    return out;
}

} // namespace uringfwd::ops
