// What the binary serves beside the engine, as pure logic: the [engine] keys that name
// it, the access log's exact lines, and the metric names and histograms.
#include "ops/access_log_line.hpp"
#include "ops/metrics_families.hpp"
#include "uringfwd/config_file.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <prometheus/text_serializer.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <string>
#include <vector>

namespace uringfwd {
namespace {

using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const std::string kRoute = "[[route]]\nname = \"web\"\nlisten = \"127.0.0.1:8080\"\n"
                           "  [[route.upstream]]\n  address = \"127.0.0.1:9001\"\n";

ConfigFileResult parse(const std::string& engine_keys) {
    return parse_config("[engine]\n" + engine_keys + kRoute, "t.toml");
}

TEST(OperationsConfig, KeysMapOntoOperationsConfig) {
    const ConfigFileResult r = parse("metrics = \"127.0.0.1:9100\"\naccess_log = \"-\"\n"
                                     "access_log_format = \"json\"\naccess_log_flush = \"2s\"\n");
    ASSERT_THAT(r.errors, IsEmpty());
    ASSERT_TRUE(r.operations.metrics.has_value());
    EXPECT_EQ(r.operations.metrics->to_string(), "127.0.0.1:9100");
    EXPECT_EQ(r.operations.access_log, "-");
    EXPECT_EQ(r.operations.access_log_format, AccessLogFormat::Json);
    EXPECT_EQ(r.operations.access_log_flush, 2s);
}

TEST(OperationsConfig, OffByDefault) {
    const ConfigFileResult r = parse("");
    ASSERT_THAT(r.errors, IsEmpty());
    EXPECT_FALSE(r.operations.metrics.has_value());
    EXPECT_EQ(r.operations.access_log, "");
    EXPECT_EQ(r.operations.access_log_format, AccessLogFormat::Text);
    EXPECT_EQ(r.operations.access_log_flush, 50ms);
}

TEST(OperationsConfig, MistakesAreOneLineEach) {
    EXPECT_THAT(parse("metrics = \"unix:/run/m.sock\"\n").errors,
                ElementsAre("t.toml:2: [engine] metrics \"unix:/run/m.sock\": it must be a TCP "
                            "address (HOST:PORT), not a Unix socket"));
    EXPECT_THAT(parse("metrics = \"9100\"\n").errors,
                ElementsAre(HasSubstr("t.toml:2: [engine] metrics \"9100\": bad address")));
    EXPECT_THAT(parse("access_log_format = \"xml\"\n").errors,
                ElementsAre("t.toml:2: [engine] access_log_format must be text or json, not "
                            "\"xml\""));
    EXPECT_THAT(parse("access_log_flush = \"0\"\n").errors,
                ElementsAre(HasSubstr("t.toml:2: [engine] access_log_flush")));
    EXPECT_THAT(parse("access_log_flush = \"2h\"\n").errors,
                ElementsAre(HasSubstr("t.toml:2: [engine] access_log_flush")));
    EXPECT_THAT(parse("access_log = 1\n").errors,
                ElementsAre("t.toml:2: [engine] access_log must be a string, not 1"));
}

ConnectionRecord record() {
    ConnectionRecord r;
    r.info.route = "web";
    r.info.client = Endpoint::parse("192.0.2.7:50123");
    r.upstream = Endpoint::parse("10.0.0.5:8080");
    r.bytes_to_upstream = 517;
    r.bytes_to_client = 14020;
    r.connect_time = 210us;
    r.duration = 48211us;
    return r;
}

// 2026-12-01T13:05:01.123456Z
const auto kWhen = std::chrono::system_clock::time_point{} + 1'796'130'301'123'456us;

TEST(AccessLogLine, Text) {
    std::string out;
    ops::append_access_line(out, AccessLogFormat::Text, record(), kWhen);
    EXPECT_EQ(out,
              "2026-12-01T13:05:01.123456Z route=web client=192.0.2.7:50123 "
              "upstream=10.0.0.5:8080 bytes_to_upstream=517 bytes_to_client=14020 connect_us=210 "
              "duration_us=48211 reason=clean\n");
}

TEST(AccessLogLine, Json) {
    std::string out;
    ops::append_access_line(out, AccessLogFormat::Json, record(), kWhen);
    EXPECT_EQ(out, "{\"time\":\"2026-12-01T13:05:01.123456Z\",\"route\":\"web\","
                   "\"client\":\"192.0.2.7:50123\",\"upstream\":\"10.0.0.5:8080\","
                   "\"bytes_to_upstream\":517,\"bytes_to_client\":14020,\"connect_us\":210,"
                   "\"duration_us\":48211,\"reason\":\"clean\",\"error\":null}\n");
}

// One set of keys for both formats (the text's time has none): a query written for one
// reads the other. The text said to_upstream/to_client where JSON said bytes_*.
TEST(AccessLogLine, TextAndJsonHaveTheSameKeys) {
    ConnectionRecord r = record();
    r.error = ECONNRESET; // the text writes error= only when there is one
    std::string text;
    ops::append_access_line(text, AccessLogFormat::Text, r, kWhen);
    std::string json;
    ops::append_access_line(json, AccessLogFormat::Json, r, kWhen);
    std::vector<std::string> text_keys;
    for (std::size_t at = text.find(' '); at != std::string::npos; at = text.find(' ', at + 1))
        text_keys.push_back(text.substr(at + 1, text.find('=', at) - at - 1));
    std::vector<std::string> json_keys;
    for (std::size_t at = json.find('"'); at != std::string::npos;) {
        const std::size_t end = json.find('"', at + 1);
        if (json[end + 1] == ':' && json.substr(at + 1, end - at - 1) != "time")
            json_keys.push_back(json.substr(at + 1, end - at - 1));
        at = json.find('"', end + 1);
    }
    EXPECT_EQ(text_keys, json_keys) << text << json;
    EXPECT_THAT(text_keys,
                ElementsAre("route", "client", "upstream", "bytes_to_upstream", "bytes_to_client",
                            "connect_us", "duration_us", "reason", "error"));
}

TEST(AccessLogLine, RefusedHasNoUpstreamAndNamesTheErrno) {
    ConnectionRecord r = record();
    r.upstream = {};
    r.bytes_to_upstream = r.bytes_to_client = 0;
    r.connect_time = 0us;
    r.reason = CloseReason::Refused;
    r.error = ECONNREFUSED;
    std::string text;
    ops::append_access_line(text, AccessLogFormat::Text, r, kWhen);
    EXPECT_THAT(text, HasSubstr(" upstream=- bytes_to_upstream=0 "));
    EXPECT_THAT(text, HasSubstr(" reason=refused error=ECONNREFUSED\n"));
    std::string json;
    ops::append_access_line(json, AccessLogFormat::Json, r, kWhen);
    EXPECT_THAT(json, HasSubstr("\"upstream\":null,"));
    EXPECT_THAT(json, HasSubstr("\"reason\":\"refused\",\"error\":\"ECONNREFUSED\"}"));
}

TEST(AccessLogLine, OddTextIsQuotedAndEscaped) {
    ConnectionRecord r = record();
    r.info.route = "a \"b\"\n";
    r.info.client = Endpoint::parse("unix:/tmp/x y");
    std::string text;
    ops::append_access_line(text, AccessLogFormat::Text, r, kWhen);
    EXPECT_THAT(text, HasSubstr(" route=\"a \\\"b\\\"\\u000a\" client=\"unix:/tmp/x y\" "));
    std::string json;
    ops::append_access_line(json, AccessLogFormat::Json, r, kWhen);
    EXPECT_THAT(json, HasSubstr("\"route\":\"a \\\"b\\\"\\u000a\""));
    EXPECT_EQ(std::count(json.begin(), json.end(), '\n'), 1); // one line, whatever the input
}

TEST(MetricNames, FollowPrometheusConventions) {
    EXPECT_EQ(ops::shard_metric_name("bytes_to_upstream", CounterKind::Counter),
              "uringfwd_shard_to_upstream_bytes_total");
    EXPECT_EQ(ops::shard_metric_name("splices", CounterKind::Counter),
              "uringfwd_shard_splices_total");
    EXPECT_EQ(ops::shard_metric_name("pipes_leased", CounterKind::Gauge),
              "uringfwd_shard_pipes_leased");
}

TEST(MetricFamilies, HistogramIsCumulativeInSeconds) {
    ops::MetricsSnapshot s;
    ShardStats shard;
    shard.connect_time.bounds_us = kConnectTimeBoundsUs;
    shard.connect_time.counts.assign(kConnectTimeBoundsUs.size() + 1, 0);
    shard.connect_time.counts[0] = 2;                           // <= 50 us
    shard.connect_time.counts[3] = 1;                           // <= 500 us
    shard.connect_time.counts[kConnectTimeBoundsUs.size()] = 1; // > 10 s
    shard.connect_time.sum_us = 12'000'600;
    shard.duration.bounds_us = kDurationBoundsUs;
    shard.duration.counts.assign(kDurationBoundsUs.size() + 1, 0);
    s.shards = {shard};
    const std::string text = prometheus::TextSerializer().Serialize(ops::metric_families(s));
    EXPECT_THAT(text, HasSubstr("# TYPE uringfwd_upstream_connect_seconds histogram\n"));
    EXPECT_THAT(
        text, HasSubstr("uringfwd_upstream_connect_seconds_bucket{shard=\"0\",le=\"5e-05\"} 2\n"));
    EXPECT_THAT(
        text,
        HasSubstr("uringfwd_upstream_connect_seconds_bucket{shard=\"0\",le=\"0.00025\"} 2\n"));
    EXPECT_THAT(
        text, HasSubstr("uringfwd_upstream_connect_seconds_bucket{shard=\"0\",le=\"0.0005\"} 3\n"));
    EXPECT_THAT(text,
                HasSubstr("uringfwd_upstream_connect_seconds_bucket{shard=\"0\",le=\"10\"} 3\n"));
    EXPECT_THAT(text,
                HasSubstr("uringfwd_upstream_connect_seconds_bucket{shard=\"0\",le=\"+Inf\"} 4\n"));
    EXPECT_THAT(text, HasSubstr("uringfwd_upstream_connect_seconds_count{shard=\"0\"} 4\n"));
    EXPECT_THAT(text, HasSubstr("uringfwd_upstream_connect_seconds_sum{shard=\"0\"} 12.0006\n"));
    // Every counter of the list, per shard, and no access log family when it is off.
    EXPECT_THAT(text, HasSubstr("uringfwd_shard_iowq_threads{shard=\"0\"} 0\n"));
    EXPECT_THAT(
        text,
        HasSubstr("uringfwd_shard_connections_closed_total{reason=\"clean\",shard=\"0\"} 0\n"));
    EXPECT_EQ(text.find("uringfwd_access_log"), std::string::npos);
}

} // namespace
} // namespace uringfwd
