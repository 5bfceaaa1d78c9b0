// The configuration file: a full file maps onto EngineConfig field by field, and every
// kind of mistake gets its own one-line message at the line of the offending key.
#include "config/access_keys.hpp"
#include "uringfwd/config_file.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#ifndef URING_FWD_EXAMPLE_CONFIG
#error "URING_FWD_EXAMPLE_CONFIG must name examples/uring-fwd.toml (set by tests/meson.build)"
#endif

namespace uringfwd {
namespace {

using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

// Two nodes of two CPUs each and a memory-only node 2, whatever the machine running
// the tests looks like.
NumaTopology fake_topology() {
    NumaTopology t;
    t.node_cpus = {{0, 1}, {2, 3}, {}};
    return t;
}

ConfigFileResult parse(const std::string& text) {
    return parse_config(text, "t.toml", fake_topology);
}

// A valid route, lines 1-5 when route_keys and upstream_keys are empty; each key added
// to route_keys moves the upstream down a line.
std::string web(const std::string& route_keys = "", const std::string& upstream_keys = "",
                const std::string& tail = "") {
    return "[[route]]\n"
           "name = \"web\"\n"
           "listen = \"127.0.0.1:8080\"\n" +
           route_keys +
           "  [[route.upstream]]\n"
           "  address = \"127.0.0.1:9001\"\n" +
           upstream_keys + tail;
}

TEST(ConfigFile, FullFileMapsFieldByField) {
    const std::string text = R"([engine]
shards = 2
cpus = "1-3"
numa_nodes = "0-1"
steering = false
iowq_cpus = "node"
iowq_max_workers = 8
data_path = "copy"
splice_mechanism = "ring"
direct_descriptors = "off"
direct_table_size = 1000
max_pipes = 64
pipe_size = 65536
copy_buffers = 256
copy_buffer_size = 65536
bulk_buffers = 8
bulk_buffer_size = 1048576
busy_poll = "50us"
bulk_coalesce = "400us"
bulk_park = "20ms"
drain_timeout = "2m"
rebalance_above = 16
upgrade_socket = "/run/uring-fwd/upgrade.sock"
handover = "listeners"
control = "/run/uring-fwd/control.sock"
control_mode = "0660"
control_group = "adm"
log_level = "debug"

[[route]]
name = "web"
listen = ["127.0.0.1:8080", "[::1]:8080", "unix:/run/web.sock"]
balance = "maglev"
connect_timeout = "250ms"
connect_deadline = "2s"
retries = 3
max_connections = 1000
idle_timeout = "1h"
max_duration = "24h"
resolve_interval = "5m"
  [[route.upstream]]
  address = "127.0.0.1:9001"
  weight = 5
  max_connections = 10
  [[route.upstream]]
  address = "unix:@backend"
  backup = true
  [route.health_check]
  interval = "3s"
  timeout = "500ms"
  rise = 4
  fall = 5
  send = "PING\r\n"
  expect = "+PONG"
  [route.passive_health]
  fall = 0
  backoff = "2s"
  max_backoff = "1m"

[[route]]
name = "db"
listen = ":5432"
  [[route.upstream]]
  address = "db.internal:5432"
)";
    const ConfigFileResult result = parse(text);
    ASSERT_THAT(result.errors, IsEmpty());
    ASSERT_TRUE(result.config.has_value());
    const EngineConfig& c = *result.config;
    EXPECT_EQ(c.placement.shards, 2u);
    EXPECT_EQ(c.placement.cpus, (std::vector<int>{1, 2, 3})); // "1-3" within nodes 0-1 (CPUs 0-3)
    EXPECT_FALSE(c.placement.steer_by_cpu);
    EXPECT_EQ(c.placement.worker_placement, WorkerPlacement::ShardNode);
    EXPECT_EQ(c.placement.iowq_max_workers, 8u);
    EXPECT_EQ(c.data_path, DataPath::Copy);
    EXPECT_EQ(c.splice.splice_mechanism, SpliceMechanism::Ring);
    EXPECT_EQ(c.ring.direct_descriptors, DirectDescriptors::Off);
    EXPECT_EQ(c.ring.direct_table_size, 1000u);
    EXPECT_EQ(c.splice.max_pipes, 64u);
    EXPECT_EQ(c.splice.pipe_size, 65536u);
    EXPECT_EQ(c.copy.copy_buffers, 256u);
    EXPECT_EQ(c.copy.copy_buffer_size, 65536u);
    EXPECT_EQ(c.copy.bulk_buffers, 8u);
    EXPECT_EQ(c.copy.bulk_buffer_size, 1048576u);
    EXPECT_EQ(c.ring.busy_poll, 50us);
    EXPECT_EQ(c.splice.bulk_coalesce, 400us);
    EXPECT_EQ(c.experimental.bulk_park, 20ms);
    EXPECT_EQ(c.drain_timeout, 2min);
    EXPECT_EQ(c.rebalance_above, 16u);
    EXPECT_EQ(c.log_level, LogLevel::Debug);
    EXPECT_EQ(result.operations.upgrade_socket, "/run/uring-fwd/upgrade.sock");
    EXPECT_EQ(result.operations.handover, UpgradeHandover::Listeners);
    EXPECT_EQ(result.operations.control, "/run/uring-fwd/control.sock");
    EXPECT_EQ(result.operations.control_mode, 0660u);
    EXPECT_EQ(result.operations.control_group, "adm");

    ASSERT_EQ(c.routes.size(), 2u);
    const RouteConfig& web = c.routes[0];
    EXPECT_EQ(web.name, "web");
    EXPECT_EQ(web.listen, (std::vector<Endpoint>{Endpoint::parse("127.0.0.1:8080"),
                                                 Endpoint::parse("[::1]:8080"),
                                                 Endpoint::parse("unix:/run/web.sock")}));
    EXPECT_EQ(web.max_connections, 1000u);
    EXPECT_EQ(web.idle_timeout, 1h);
    EXPECT_EQ(web.max_duration, 24h);
    const UpstreamPool& pool = web.pool;
    EXPECT_EQ(pool.balance, BalancePolicy::Maglev);
    EXPECT_EQ(pool.connect_timeout, 250ms);
    EXPECT_EQ(pool.connect_deadline, 2s);
    EXPECT_EQ(pool.retries, 3u);
    EXPECT_EQ(pool.resolve_interval, 5min);
    ASSERT_EQ(pool.members.size(), 2u);
    EXPECT_EQ(pool.members[0].address, Endpoint::parse("127.0.0.1:9001"));
    EXPECT_EQ(pool.members[0].weight, 5u);
    EXPECT_FALSE(pool.members[0].backup);
    EXPECT_EQ(pool.members[0].max_connections, 10u);
    EXPECT_EQ(pool.members[1].address, Endpoint::parse("unix:@backend"));
    EXPECT_EQ(pool.members[1].weight, 1u);
    EXPECT_TRUE(pool.members[1].backup);
    EXPECT_EQ(pool.members[1].max_connections, 0u);
    EXPECT_TRUE(pool.health_check.enabled);
    EXPECT_EQ(pool.health_check.interval, 3s);
    EXPECT_EQ(pool.health_check.timeout, 500ms);
    EXPECT_EQ(pool.health_check.rise, 4u);
    EXPECT_EQ(pool.health_check.fall, 5u);
    EXPECT_EQ(pool.health_check.send, "PING\r\n");
    EXPECT_EQ(pool.health_check.expect, "+PONG");
    EXPECT_EQ(pool.passive.fall, 0u);
    EXPECT_EQ(pool.passive.backoff, 2s);
    EXPECT_EQ(pool.passive.max_backoff, 1min);

    // Keys left out keep EngineConfig's and RouteConfig's defaults.
    const RouteConfig& db = c.routes[1];
    const RouteConfig defaults;
    EXPECT_EQ(db.name, "db");
    EXPECT_EQ(db.listen, (std::vector<Endpoint>{Endpoint::parse(":5432")}));
    EXPECT_EQ(db.max_connections, defaults.max_connections);
    EXPECT_EQ(db.idle_timeout, defaults.idle_timeout);
    EXPECT_EQ(db.pool.balance, defaults.pool.balance);
    EXPECT_EQ(db.pool.connect_timeout, defaults.pool.connect_timeout);
    EXPECT_EQ(db.pool.connect_deadline, defaults.pool.connect_deadline);
    EXPECT_EQ(db.pool.retries, defaults.pool.retries);
    EXPECT_FALSE(db.pool.health_check.enabled);
    EXPECT_EQ(db.pool.passive.fall, defaults.pool.passive.fall);
    ASSERT_EQ(db.pool.members.size(), 1u);
    EXPECT_EQ(db.pool.members[0].address, Endpoint::parse("db.internal:5432"));
}

TEST(ConfigFile, NoEngineTableKeepsEngineDefaults) {
    const ConfigFileResult result = parse(web());
    ASSERT_THAT(result.errors, IsEmpty());
    const EngineConfig& c = *result.config;
    const EngineConfig defaults;
    EXPECT_EQ(c.placement.shards, defaults.placement.shards);
    EXPECT_EQ(c.placement.cpus, defaults.placement.cpus);
    EXPECT_EQ(c.placement.steer_by_cpu, defaults.placement.steer_by_cpu);
    EXPECT_EQ(c.data_path, defaults.data_path);
    EXPECT_EQ(c.ring.direct_descriptors, DirectDescriptors::Auto);
    EXPECT_EQ(c.splice.splice_mechanism, SpliceMechanism::Auto);
    EXPECT_EQ(c.ring.direct_table_size, 0u);
    EXPECT_EQ(c.splice.max_pipes, defaults.splice.max_pipes);
    EXPECT_EQ(c.copy.copy_buffers, defaults.copy.copy_buffers);
    EXPECT_EQ(c.copy.bulk_buffers, defaults.copy.bulk_buffers);
    EXPECT_EQ(c.copy.bulk_buffer_size, defaults.copy.bulk_buffer_size);
    EXPECT_EQ(c.drain_timeout, defaults.drain_timeout);
    EXPECT_EQ(c.rebalance_above, 0u); // off
    EXPECT_EQ(c.log_level, defaults.log_level);
}

TEST(ConfigFile, NumaNodesAloneGiveTheirCpus) {
    const ConfigFileResult result = parse("[engine]\nnuma_nodes = \"1\"\n" + web());
    ASSERT_THAT(result.errors, IsEmpty());
    EXPECT_EQ(result.config->placement.cpus, (std::vector<int>{2, 3}));
}

// The topology is read only when the file names NUMA nodes.
TEST(ConfigFile, TopologyIsReadOnlyForNumaNodes) {
    int reads = 0;
    const TopologyReader counting = [&] {
        ++reads;
        return fake_topology();
    };
    EXPECT_TRUE(parse_config("[engine]\ncpus = \"0-1\"\n" + web(), "t.toml", counting).config);
    EXPECT_EQ(reads, 0);
    EXPECT_TRUE(parse_config("[engine]\nnuma_nodes = \"0\"\n" + web(), "t.toml", counting).config);
    EXPECT_EQ(reads, 1);
}

TEST(ConfigFile, ExpectWithoutSendIsFine) {
    const ConfigFileResult result =
        parse(web("", "", "  [route.health_check]\n  expect = \"SSH-\"\n  enabled = false\n"));
    ASSERT_THAT(result.errors, IsEmpty());
    EXPECT_FALSE(result.config->routes[0].pool.health_check.enabled);
    EXPECT_EQ(result.config->routes[0].pool.health_check.expect, "SSH-");
}

TEST(ConfigFile, NonAsciiInCommentsAndStrings) {
    const ConfigFileResult result =
        parse("# caf\u00e9 \u2615\n" +
              web("", "", "  [route.health_check] # \u00e9\n  expect = \"\u00e9\"\n"));
    ASSERT_THAT(result.errors, IsEmpty());
    EXPECT_EQ(result.config->routes[0].pool.health_check.expect, "\u00e9");
}

TEST(ConfigFile, ListenPortZeroMayRepeat) {
    const std::string two = "[[route]]\nname = \"a\"\nlisten = \"127.0.0.1:0\"\n"
                            "[[route.upstream]]\naddress = \"127.0.0.1:1\"\n"
                            "[[route]]\nname = \"b\"\nlisten = \"127.0.0.1:0\"\n"
                            "[[route.upstream]]\naddress = \"127.0.0.1:1\"\n";
    EXPECT_THAT(parse(two).errors, IsEmpty());
}

TEST(ConfigFile, RoutesShareAnAddressByServerName) {
    const ConfigFileResult r =
        parse(web() + "[[route]]\nname = \"a\"\nlisten = \"127.0.0.1:8080\"\n"
                      "server_names = [\"a.example\", \"*.a.example\"]\nalpn = [\"h2\"]\n"
                      "[[route.upstream]]\naddress = \":2\"\n");
    ASSERT_THAT(r.errors, IsEmpty());
    ASSERT_EQ(r.config->routes.size(), 2u);
    EXPECT_THAT(r.config->routes[1].server_names, ElementsAre("a.example", "*.a.example"));
    EXPECT_THAT(r.config->routes[1].alpn, ElementsAre("h2"));
    EXPECT_TRUE(r.config->routes[0].server_names.empty());
}

// A listen entry may be a table that says who may connect to a Unix socket file.
TEST(ConfigFile, ListenTablesSetUnixSocketAccess) {
    const ConfigFileResult r = parse(
        "[[route]]\nname = \"u\"\nlisten = [\"127.0.0.1:1\",\n"
        "  { address = \"unix:/run/u.sock\", mode = \"0660\", user = \"nobody\", group = \"33\" "
        "},\n  { address = \"unix:/run/v.sock\", mode = \"600\" }]\n"
        "[[route.upstream]]\naddress = \":2\"\n");
    ASSERT_THAT(r.errors, IsEmpty());
    const RouteConfig& route = r.config->routes.at(0);
    ASSERT_EQ(route.listen.size(), 3u);
    EXPECT_EQ(route.listen[1], Endpoint::parse("unix:/run/u.sock"));
    ASSERT_EQ(route.listen_access.size(), 3u);
    EXPECT_TRUE(route.listen_access[0].empty());
    EXPECT_EQ(route.listen_access[1], (UnixSocketAccess{0660u, "nobody", "33"}));
    EXPECT_EQ(route.listen_access[2], (UnixSocketAccess{0600u, "", ""}));
}

// Asked to, the parser looks names up as a start does; a user is found locally (NSS
// files), so this needs no network.
TEST(ConfigFile, NameLookupReportsWhatAStartCouldNotFind) {
    const std::string text = "[[route]]\nname = \"u\"\nlisten = [\"localhost:0\",\n"
                             "  { address = \"unix:/run/u.sock\", user = \"0\", group = "
                             "\"no-such-group-uringfwd\" }]\n"
                             "[[route.upstream]]\naddress = \"localhost:1\"\n";
    EXPECT_THAT(parse(text).errors, IsEmpty()) << "not looked up unless asked";
    EXPECT_THAT(parse_config(text, "t.toml", fake_topology, NameLookup::Resolve).errors,
                ElementsAre("t.toml:4: route \"u\": listen \"unix:/run/u.sock\": no group named "
                            "\"no-such-group-uringfwd\""));
}

// Names tell members of one address apart (two pools of connections to one server,
// each with its own limit and series).
TEST(ConfigFile, UpstreamNamesLetOneAddressServeTwice) {
    const ConfigFileResult r =
        parse(web("", "  name = \"db-1\"\n",
                  "  [[route.upstream]]\n  address = \"127.0.0.1:9001\"\n  name = \"db-2\"\n"
                  "  [[route.upstream]]\n  address = \"127.0.0.1:9002\"\n"));
    ASSERT_THAT(r.errors, IsEmpty());
    const auto& members = r.config->routes.at(0).pool.members;
    ASSERT_EQ(members.size(), 3u);
    EXPECT_EQ(members[0].name, "db-1");
    EXPECT_EQ(members[1].name, "db-2");
    EXPECT_EQ(members[2].name, "");
}

TEST(ConfigFile, DualStackIsARouteKey) {
    EXPECT_TRUE(parse(web("dual_stack = true\n")).config->routes.at(0).dual_stack);
    EXPECT_FALSE(parse(web()).config->routes.at(0).dual_stack);
}

TEST(ConfigFile, MemberLifecycleKeys) {
    const ConfigFileResult r =
        parse(web("on_member_down = \"close\"\nslow_start = \"30s\"\n", "  slow_start = \"5s\"\n"));
    ASSERT_THAT(r.errors, IsEmpty());
    const RouteConfig& route = r.config->routes.at(0);
    EXPECT_EQ(route.on_member_down, OnMemberDown::Close);
    EXPECT_EQ(route.slow_start, 30s);
    EXPECT_EQ(route.pool.members.at(0).slow_start, std::optional(std::chrono::milliseconds{5s}));
    const ConfigFileResult defaults = parse(web());
    EXPECT_EQ(defaults.config->routes.at(0).on_member_down, OnMemberDown::Keep);
    EXPECT_EQ(defaults.config->routes.at(0).slow_start, 0s);
    EXPECT_EQ(defaults.config->routes.at(0).pool.members.at(0).slow_start, std::nullopt);
}

TEST(ConfigFile, AccessListAndPerSourceKeysMap) {
    const ConfigFileResult r = parse(
        "[engine]\nallow = [\"10.0.0.0/8\"]\ndeny = [\"10.1.0.0/16\", \"::1/128\"]\n"
        "source_table_size = 1024\n" +
        web("allow = [\"127.0.0.0/8\"]\ndeny = [\"127.0.0.2\"]\nmax_connections_per_source = 5\n"
            "connection_rate_per_source = \"10/s\"\nconnection_burst_per_source = 20\n"
            "source_prefix_v4 = 24\nsource_prefix_v6 = 48\n"));
    ASSERT_THAT(r.errors, IsEmpty());
    EXPECT_THAT(r.config->access.allow, ElementsAre("10.0.0.0/8"));
    EXPECT_THAT(r.config->access.deny, ElementsAre("10.1.0.0/16", "::1/128"));
    EXPECT_EQ(r.config->access.source_table_size, 1024u);
    const RouteConfig& route = r.config->routes.at(0);
    EXPECT_THAT(route.allow, ElementsAre("127.0.0.0/8"));
    EXPECT_THAT(route.deny, ElementsAre("127.0.0.2"));
    EXPECT_EQ(route.max_connections_per_source, 5u);
    EXPECT_EQ(route.connection_rate_per_source, 10u);
    EXPECT_EQ(route.connection_burst_per_source, 20u);
    EXPECT_EQ(route.source_prefix_v4, 24u);
    EXPECT_EQ(route.source_prefix_v6, 48u);
    // Unset: no list, no limit, a source is one address (v4) or a /64 (v6).
    const ConfigFileResult plain = parse(web("connection_rate_per_source = 0\n"));
    ASSERT_THAT(plain.errors, IsEmpty());
    const RouteConfig& defaults = plain.config->routes.at(0);
    EXPECT_THAT(defaults.allow, IsEmpty());
    EXPECT_THAT(defaults.deny, IsEmpty());
    EXPECT_EQ(defaults.max_connections_per_source, 0u);
    EXPECT_EQ(defaults.connection_rate_per_source, 0u);
    EXPECT_EQ(defaults.source_prefix_v4, 32u);
    EXPECT_EQ(defaults.source_prefix_v6, 64u);
    EXPECT_EQ(plain.config->access.source_table_size, 65536u);
}

TEST(ConfigFile, ConnectionRateIsAWholeNumberPerSecond) {
    EXPECT_EQ(config::parse_connection_rate("10/s"), 10u);
    EXPECT_EQ(config::parse_connection_rate("1/s"), 1u);
    for (const char* bad : {"10", "/s", "0/s", "-1/s", "1.5/s", "10/m", "10 /s", "4294967296/s"})
        EXPECT_EQ(config::parse_connection_rate(bad), std::nullopt) << bad;
}

TEST(ConfigFile, UpstreamsAsInlineTables) {
    const ConfigFileResult result =
        parse("[[route]]\nname = \"a\"\nlisten = \":1\"\n"
              "upstream = [{ address = \"127.0.0.1:2\" }, { address = \"127.0.0.1:3\" }]\n");
    ASSERT_THAT(result.errors, IsEmpty());
    EXPECT_EQ(result.config->routes[0].pool.members.size(), 2u);
}

// One case: a file with one mistake, and the exact lines it must produce.
struct ErrorCase {
    std::string name;
    std::string text;
    std::vector<std::string> errors;
};

std::ostream& operator<<(std::ostream& os, const ErrorCase& c) {
    return os << c.name;
}

class ConfigFileError : public ::testing::TestWithParam<ErrorCase> {};

TEST(ConfigFile, ProxyProtocolKeysMap) {
    const ConfigFileResult r =
        parse(web("accept_proxy = true\ntrusted_sources = [\"10.0.0.0/8\", \"::1/128\"]\n"
                  "proxy_tlvs = [\"authority\", \"alpn\", \"0xE0\"]\nsend_proxy = \"v2\"\n"
                  "inspect_timeout = \"500ms\"\n",
                  "  send_proxy = \"v1\"\n"));
    ASSERT_THAT(r.errors, IsEmpty());
    const RouteConfig& route = r.config->routes.at(0);
    EXPECT_TRUE(route.accept_proxy);
    EXPECT_THAT(route.trusted_sources, ElementsAre("10.0.0.0/8", "::1/128"));
    EXPECT_THAT(route.proxy_tlvs, ElementsAre(0x02, 0x01, 0xE0));
    EXPECT_EQ(route.send_proxy, ProxyVersion::V2);
    EXPECT_EQ(route.inspect_timeout, 500ms);
    EXPECT_EQ(route.pool.members.at(0).send_proxy, ProxyVersion::V1);
    // Unset: nothing read, nothing sent.
    const RouteConfig plain = parse(web()).config->routes.at(0);
    EXPECT_FALSE(plain.accept_proxy);
    EXPECT_EQ(plain.send_proxy, ProxyVersion::Off);
    EXPECT_FALSE(plain.pool.members.at(0).send_proxy.has_value());
}

TEST_P(ConfigFileError, ReportsExactly) {
    const ConfigFileResult result = parse(GetParam().text);
    EXPECT_FALSE(result.config.has_value());
    EXPECT_EQ(result.errors, GetParam().errors) << "file:\n" << GetParam().text;
}

std::string engine(const std::string& keys) {
    return "[engine]\n" + keys + web(); // keys start at line 2
}

// clang-format off
const ErrorCase kErrorCases[] = {
    // The file as a whole.
    {"SyntaxError", "[engine]\nshards = \n" + web(),
     {"t.toml:2: TOML syntax error: Error while parsing key-value pair: expected value, saw '\\n'"}},
    {"DuplicateKeyIsASyntaxError", web("retries = 1\nretries = 2\n"),
     {"t.toml:5: TOML syntax error: Error while parsing key-value pair: cannot redefine existing "
      "integer 'retries'"}},
    // toml++ 3.3 asserts on these two in a debug build (tests/fuzz/toml_assert.hpp); the
    // library the binary links reports them.
    {"BadCharacterInTableHeader", "[[`route]]\n",
     {"t.toml:1: TOML syntax error: Error while parsing key: expected bare key starting "
      "character or string delimiter, saw '`'"}},
    {"ArrayClosedByABrace", "route = [}\n",
     {"t.toml:1: TOML syntax error: Error while parsing value: could not determine value type"}},
    // A code point toml++ 3.3's whitespace table has no case for (config_fuzz.cpp).
    {"NonAsciiAfterAValue", "a = 1\u00e9\n",
     {"t.toml:1: TOML syntax error: Error while parsing decimal integer: expected digit, "
      "saw '\u00e9'"}},
    {"EmptyFile", "", {"t.toml:1: no routes: the file needs at least one [[route]]"}},
    {"EngineOnly", "[engine]\nshards = 1\n",
     {"t.toml:1: no routes: the file needs at least one [[route]]"}},
    {"EmptyRouteArray", "\nroute = []\n",
     {"t.toml:2: no routes: the file needs at least one [[route]]"}},
    {"RouteNotAnArray", "[route]\nname = \"web\"\n",
     {"t.toml:1: route must be an array of tables (written [[route]]), not a table"}},
    {"EngineNotATable", "engine = 5\n" + web(),
     {"t.toml:1: engine must be a table, not 5"}},
    {"UnknownTopLevelTable", web() + "[engin]\nshards = 1\n",
     {"t.toml:6: unknown key 'engin' at the top level (did you mean 'engine'?)"}},
    {"UnknownTopLevelKeyWithoutSuggestion", "colour = \"blue\"\n" + web(),
     {"t.toml:1: unknown key 'colour' at the top level"}},
    {"OddKeyIsEscaped", "\"a\\nb\" = 1\n" + web(),
     {"t.toml:1: unknown key \"a\\x0ab\" at the top level"}},

    // [engine]
    {"EngineUnknownKey", engine("shard = 2\n"),
     {"t.toml:2: unknown key 'shard' in [engine] (did you mean 'shards'?)"}},
    {"ShardsNegative", engine("shards = -1\n"),
     {"t.toml:2: [engine] shards must be 0..4096, not -1"}},
    {"ShardsAString", engine("shards = \"4\"\n"),
     {"t.toml:2: [engine] shards must be an integer (0..4096), not \"4\""}},
    {"CpusBadList", engine("cpus = \"7-3\"\n"),
     {"t.toml:2: [engine] cpus: bad CPU list \"7-3\": range 7-3 is reversed"}},
    {"CpusNotAString", engine("cpus = 5\n"),
     {"t.toml:2: [engine] cpus must be a string, not 5"}},
    {"NumaNodeMissing", engine("numa_nodes = \"5\"\n"),
     {"t.toml:2: [engine] numa_nodes: NUMA node 5 does not exist (this machine has nodes 0-2)"}},
    {"NumaNodeWithoutCpus", engine("numa_nodes = \"2\"\n"),
     {"t.toml:2: [engine] numa_nodes \"2\" have no online CPU"}},
    {"CpusOutsideNumaNodes", engine("cpus = \"0-1\"\nnuma_nodes = \"1\"\n"),
     {"t.toml:3: [engine] cpus \"0-1\" and numa_nodes \"1\" have no CPU in common"}},
    {"SteeringNotABool", engine("steering = \"yes\"\n"),
     {"t.toml:2: [engine] steering must be true or false, not \"yes\""}},
    {"IowqCpusUnknown", engine("iowq_cpus = \"socket\"\n"),
     {"t.toml:2: [engine] iowq_cpus must be cpu or node, not \"socket\""}},
    {"IowqMaxWorkersTooMany", engine("iowq_max_workers = 70000\n"),
     {"t.toml:2: [engine] iowq_max_workers must be 0..65536, not 70000"}},
    {"DataPathUnknown", engine("data_path = \"zerocopy\"\n"),
     {"t.toml:2: [engine] data_path must be splice, copy or auto, not \"zerocopy\""}},
    {"SpliceMechanismUnknown", engine("splice_mechanism = \"io-wq\"\n"),
     {"t.toml:2: [engine] splice_mechanism must be auto, ring or inline, not \"io-wq\""}},
    {"DirectDescriptorsUnknown", engine("direct_descriptors = \"yes\"\n"),
     {"t.toml:2: [engine] direct_descriptors must be auto, on or off, not \"yes\""}},
    {"DirectTableSizeTooLarge", engine("direct_table_size = 2000000\n"),
     {"t.toml:2: [engine] direct_table_size must be 0..1048576, not 2000000"}},
    {"RebalanceAboveNegative", engine("rebalance_above = -1\n"),
     {"t.toml:2: [engine] rebalance_above must be 0..1073741824, not -1"}},
    {"MaxPipesZero", engine("max_pipes = 0\n"),
     {"t.toml:2: [engine] max_pipes must be 1..1048576, not 0"}},
    {"PipeSizeTooSmall", engine("pipe_size = 100\n"),
     {"t.toml:2: [engine] pipe_size must be 0 (the system's pipe-max-size) or "
      "4096..1073741824, not 100"}},
    {"CopyBuffersNotAPowerOfTwo", engine("copy_buffers = 100\n"),
     {"t.toml:2: [engine] copy_buffers must be a power of two 1..32768, not 100"}},
    {"CopyBuffersTooMany", engine("copy_buffers = 65536\n"),
     {"t.toml:2: [engine] copy_buffers must be a power of two 1..32768, not 65536"}},
    {"CopyBufferSizeTooSmall", engine("copy_buffer_size = 512\n"),
     {"t.toml:2: [engine] copy_buffer_size must be 1024..16777216, not 512"}},
    {"BulkBuffersTooMany", engine("bulk_buffers = 32\n"),
     {"t.toml:2: [engine] bulk_buffers must be 0 or a power of two 1..16, not 32"}},
    {"BulkBuffersNotAPowerOfTwo", engine("bulk_buffers = 12\n"),
     {"t.toml:2: [engine] bulk_buffers must be 0 or a power of two 1..16, not 12"}},
    {"BulkBufferSizeTooSmall", engine("bulk_buffer_size = 1000\n"),
     {"t.toml:2: [engine] bulk_buffer_size must be 4096..16777216, not 1000"}},
    {"BulkCoalesceTooLong", engine("bulk_coalesce = \"1s\"\n"),
     {"t.toml:2: [engine] bulk_coalesce must be 0..100ms, not \"1s\""}},
    {"BusyPollTooLong", engine("busy_poll = \"2s\"\n"),
     {"t.toml:2: [engine] busy_poll must be 0..1s, not \"2s\""}},
    {"DrainTimeoutBadUnit", engine("drain_timeout = \"30 s\"\n"),
     {"t.toml:2: [engine] drain_timeout must be a duration such as \"2s\", not \"30 s\": "
      "unknown unit \" s\" (use ms, s, m or h)"}},
    {"DrainTimeoutWithoutUnit", engine("drain_timeout = 30\n"),
     {"t.toml:2: [engine] drain_timeout must be a duration such as \"2s\", not 30 (a number "
      "needs a unit, in quotes: \"30s\")"}},
    {"DrainTimeoutAFloat", engine("drain_timeout = 1.5\n"),
     {"t.toml:2: [engine] drain_timeout must be a duration such as \"2s\", not 1.5"}},
    {"DrainTimeoutTooLong", engine("drain_timeout = \"25h\"\n"),
     {"t.toml:2: [engine] drain_timeout must be 0..24h, not \"25h\""}},
    {"UpgradeSocketNotAString", engine("upgrade_socket = 1\n"),
     {"t.toml:2: [engine] upgrade_socket must be a string, not 1"}},
    {"UpgradeSocketRelative", engine("upgrade_socket = \"run/u.sock\"\n"),
     {"t.toml:2: [engine] upgrade_socket must be an absolute path of at most 107 bytes, not "
      "\"run/u.sock\""}},
    {"HandoverUnknown", engine("handover = \"both\"\n"),
     {"t.toml:2: [engine] handover must be connections or listeners, not \"both\""}},
    {"ControlRelative", engine("control = \"ctl.sock\"\n"),
     {"t.toml:2: [engine] control must be an absolute path of at most 107 bytes, not "
      "\"ctl.sock\""}},
    {"ControlModeDecimal", engine("control_mode = 660\n"),
     {"t.toml:2: [engine] control_mode must be an octal string such as \"0660\" (at most "
      "\"0777\"), not 660"}},
    {"ControlGroupEmpty", engine("control_group = \"\"\n"),
     {"t.toml:2: [engine] control_group must be a group name, or a number, not \"\""}},
    {"LogLevelUnknown", engine("log_level = \"loud\"\n"),
     {"t.toml:2: [engine] log_level must be error, warn, info or debug, not \"loud\""}},

    // [[route]]
    {"RouteUnknownKey", web("balanse = \"maglev\"\n"),
     {"t.toml:4: route \"web\": unknown key 'balanse' in [[route]] (did you mean 'balance'?)"}},
    {"NameMissing", "[[route]]\nlisten = \":1\"\n[[route.upstream]]\naddress = \":2\"\n",
     {"t.toml:1: route #1: name is required"}},
    {"NameNotAString", "[[route]]\nname = 5\nlisten = \":1\"\n[[route.upstream]]\naddress = \":2\"\n",
     {"t.toml:2: route #1: name must be a string, not 5"}},
    {"NameWithASpace", "[[route]]\nname = \"my web\"\nlisten = \":1\"\n"
                       "[[route.upstream]]\naddress = \":2\"\n",
     {"t.toml:2: route #1: name must be 1..64 letters, digits, '-', '_' or '.', not \"my web\""}},
    {"NameTwice", web() + "[[route]]\nname = \"web\"\nlisten = \":1\"\n"
                          "[[route.upstream]]\naddress = \":2\"\n",
     {"t.toml:7: route \"web\": name is already used by the route at line 1"}},
    {"ListenMissing", "[[route]]\nname = \"web\"\n[[route.upstream]]\naddress = \":2\"\n",
     {"t.toml:1: route \"web\": listen is required: an address, or an array of them"}},
    {"ListenEmpty", "[[route]]\nname = \"web\"\nlisten = []\n[[route.upstream]]\naddress = \":2\"\n",
     {"t.toml:3: route \"web\": listen must hold at least one address"}},
    {"ListenANumber", "[[route]]\nname = \"web\"\nlisten = 8080\n"
                      "[[route.upstream]]\naddress = \":2\"\n",
     {"t.toml:3: route \"web\": listen must be an address or an array of addresses, not 8080"}},
    {"ListenArrayWithANumber", "[[route]]\nname = \"web\"\nlisten = [\":1\",\n  2]\n"
                               "[[route.upstream]]\naddress = \":2\"\n",
     {"t.toml:4: route \"web\": listen must be an address, or a table such as { address = "
      "\"unix:/run/a.sock\", mode = \"0660\" }, not 2"}},
    {"ListenModeAnInteger", "[[route]]\nname = \"u\"\n"
                            "listen = { address = \"unix:/run/u.sock\", mode = 660 }\n"
                            "[[route.upstream]]\naddress = \":2\"\n",
     {"t.toml:3: route \"u\": listen mode must be an octal string such as \"0660\" (at most "
      "\"0777\"), not 660"}},
    {"ListenModeNotOctal", "[[route]]\nname = \"u\"\nlisten = [\n"
                           "  { address = \"unix:/run/u.sock\", mode = \"0689\" }]\n"
                           "[[route.upstream]]\naddress = \":2\"\n",
     {"t.toml:4: route \"u\": listen mode must be an octal string such as \"0660\" (at most "
      "\"0777\"), not \"0689\""}},
    {"ListenModeBeyondPermissions", "[[route]]\nname = \"u\"\n"
                                    "listen = { address = \"unix:/run/u.sock\", mode = \"4755\" }\n"
                                    "[[route.upstream]]\naddress = \":2\"\n",
     {"t.toml:3: route \"u\": listen mode must be an octal string such as \"0660\" (at most "
      "\"0777\"), not \"4755\""}},
    {"ListenModeOnTcp", "[[route]]\nname = \"u\"\n"
                        "listen = { address = \"127.0.0.1:1\", mode = \"0660\" }\n"
                        "[[route.upstream]]\naddress = \":2\"\n",
     {"t.toml:3: route \"u\": listen \"127.0.0.1:1\": mode, user and group are for unix: paths "
      "only (a file to set them on)"}},
    {"ListenGroupOnAnAbstractName", "[[route]]\nname = \"u\"\n"
                                    "listen = { address = \"unix:@u\", group = \"www\" }\n"
                                    "[[route.upstream]]\naddress = \":2\"\n",
     {"t.toml:3: route \"u\": listen \"unix:@u\": mode, user and group are for unix: paths "
      "only (a file to set them on)"}},
    {"ListenTableWithoutAddress", "[[route]]\nname = \"u\"\nlisten = { mode = \"0660\" }\n"
                                  "[[route.upstream]]\naddress = \":2\"\n",
     {"t.toml:3: route \"u\": listen address is required in a listen table"}},
    {"ListenTableUnknownKey", "[[route]]\nname = \"u\"\n"
                              "listen = { address = \"unix:/run/u.sock\", owner = \"me\" }\n"
                              "[[route.upstream]]\naddress = \":2\"\n",
     {"t.toml:3: route \"u\": unknown key 'owner' in a listen table (address, mode, user, "
      "group)"}},
    {"ListenEmptyUser", "[[route]]\nname = \"u\"\n"
                        "listen = { address = \"unix:/run/u.sock\", user = \"\" }\n"
                        "[[route.upstream]]\naddress = \":2\"\n",
     {"t.toml:3: route \"u\": listen user must be a user or group name, or a number, not \"\""}},
    {"DualStackNotABool", web("dual_stack = 1\n"),
     {"t.toml:4: route \"web\": dual_stack must be true or false, not 1"}},
    {"DualStackDiffersOnASharedAddress",
     "[[route]]\nname = \"a\"\nlisten = \"[::]:443\"\ndual_stack = true\n"
     "server_names = [\"a.example\"]\n[[route.upstream]]\naddress = \":2\"\n"
     "[[route]]\nname = \"b\"\nlisten = \"[::]:443\"\n[[route.upstream]]\naddress = \":2\"\n",
     {"t.toml:10: route \"b\": listen address \"[::]:443\" is set up otherwise (mode, user, "
      "group, dual_stack) by route \"a\" at line 3, which shares it"}},
    {"ListenSharedWithOtherAccess",
     "[[route]]\nname = \"a\"\nlisten = { address = \"unix:/run/s.sock\", mode = \"0660\" }\n"
     "server_names = [\"a.example\"]\n[[route.upstream]]\naddress = \":2\"\n"
     "[[route]]\nname = \"b\"\nlisten = \"unix:/run/s.sock\"\n"
     "[[route.upstream]]\naddress = \":2\"\n",
     {"t.toml:9: route \"b\": listen address \"unix:/run/s.sock\" is set up otherwise (mode, "
      "user, group, dual_stack) by route \"a\" at line 3, which shares it"}},
    {"ListenBadAddress", "[[route]]\nname = \"web\"\nlisten = \"nope\"\n"
                         "[[route.upstream]]\naddress = \":2\"\n",
     {"t.toml:3: route \"web\": listen: bad address \"nope\": missing ':port' (expected "
      "\"host:port\", \"[v6]:port\" or \"unix:path\")"}},
    {"ListenTwiceInOneRoute", "[[route]]\nname = \"web\"\nlisten = [\":1\",\n  \":1\"]\n"
                              "[[route.upstream]]\naddress = \":2\"\n",
     {"t.toml:4: route \"web\": listen address \":1\" is listed twice (first at line 3)"}},
    {"ListenInTwoRoutes", web() + "[[route]]\nname = \"api\"\nlisten = \"127.0.0.1:8080\"\n"
                                  "[[route.upstream]]\naddress = \":2\"\n",
     {"t.toml:8: listen address \"127.0.0.1:8080\": routes \"web\" and \"api\" share a listen "
      "address and neither has server_names or alpn: only one may be the default"}},
    {"ServerNamesNotAnArray", web("server_names = \"a.example\"\n"),
     {"t.toml:4: route \"web\": server_names must be a non-empty array of strings, not "
      "\"a.example\""}},
    {"ServerNameBad", web("server_names = [\"a..example\"]\n"),
     {"t.toml:4: route \"web\": server_names \"a..example\": has an empty label or one longer "
      "than 63 characters (no leading, trailing or double dots)"}},
    {"ServerNameWildcardInside", web("server_names = [\"a.*.example\"]\n"),
     {"t.toml:4: route \"web\": server_names \"a.*.example\": may hold letters, digits, '-', "
      "'_' and dots, with a '*.' only at the front"}},
    {"AlpnEmpty", web("alpn = [\"\"]\n"),
     {"t.toml:4: route \"web\": alpn \"\": must be 1..255 characters"}},
    {"ServerNameTwiceInOneRoute", web("server_names = [\"a.example\", \"A.example\"]\n"),
     {"t.toml:4: route \"web\": server name \"a.example\" is listed twice"}},
    {"ServerNameInTwoRoutes",
     web("server_names = [\"a.example\"]\n") +
         "[[route]]\nname = \"api\"\nlisten = \"127.0.0.1:8080\"\nserver_names = [\"a.example\"]\n"
         "[[route.upstream]]\naddress = \":2\"\n",
     {"t.toml:9: listen address \"127.0.0.1:8080\": server name \"a.example\" is in routes "
      "\"web\" and \"api\" of one listen address: a client could go to either"}},
    {"BalanceUnknown", web("balance = \"random\"\n"),
     {"t.toml:4: route \"web\": balance must be round-robin, least-active or maglev, not "
      "\"random\""}},
    {"ConnectTimeoutZero", web("connect_timeout = \"0\"\n"),
     {"t.toml:4: route \"web\": connect_timeout must be 1ms..1h, not \"0\""}},
    {"ConnectDeadlineInDays", web("connect_deadline = \"2d\"\n"),
     {"t.toml:4: route \"web\": connect_deadline must be a duration such as \"2s\", not "
      "\"2d\": unknown unit \"d\" (use ms, s, m or h)"}},
    {"RetriesTooMany", web("retries = 101\n"),
     {"t.toml:4: route \"web\": retries must be 0..100, not 101"}},
    {"MaxConnectionsNegative", web("max_connections = -1\n"),
     {"t.toml:4: route \"web\": max_connections must be 0 or more, not -1"}},
    {"IdleTimeoutAWord", web("idle_timeout = \"forever\"\n"),
     {"t.toml:4: route \"web\": idle_timeout must be a duration such as \"2s\", not "
      "\"forever\": must start with a whole number"}},
    {"MaxDurationAWord", web("max_duration = \"a day\"\n"),
     {"t.toml:4: route \"web\": max_duration must be a duration such as \"2s\", not "
      "\"a day\": must start with a whole number"}},
    {"ResolveIntervalAFraction", web("resolve_interval = \"1.5s\"\n"),
     {"t.toml:4: route \"web\": resolve_interval must be a duration such as \"2s\", not "
      "\"1.5s\": must be a whole number (use a smaller unit: 1500ms, not 1.5s)"}},
    {"InspectTimeoutZero", web("inspect_timeout = \"0\"\n"), {"t.toml:4: route \"web\": inspect_timeout must be 1ms..1h, not \"0\""}},
    {"AcceptProxyNotABool", web("accept_proxy = \"yes\"\n"), {"t.toml:4: route \"web\": accept_proxy must be true or false, not \"yes\""}},
    {"SendProxyUnknown", web("send_proxy = \"v3\"\n"), {"t.toml:4: route \"web\": send_proxy must be off, v1 or v2, not \"v3\""}},
    {"TrustedSourcesBadCidr", web("accept_proxy = true\ntrusted_sources = [\"10.0.0.1/8\"]\n"),
     {"t.toml:5: route \"web\": trusted_sources: \"10.0.0.1/8\": bits are set past the "
      "prefix length (did you mean the network address?)"}},
    {"TrustedSourcesNotAnArray", web("accept_proxy = true\ntrusted_sources = \"10.0.0.0/8\"\n"),
     {"t.toml:5: route \"web\": trusted_sources must be an array of strings, not "
      "\"10.0.0.0/8\""}},
    {"TrustedSourcesWithoutAcceptProxy", web("trusted_sources = [\"10.0.0.0/8\"]\n"), {"t.toml:4: route \"web\": trusted_sources needs accept_proxy = true"}},
    {"ProxyTlvsUnknown", web("accept_proxy = true\nproxy_tlvs = [\"alpn\", \"sni\"]\n"), {"t.toml:5: route \"web\": proxy_tlvs: \"sni\" is not \"alpn\", \"authority\", "
      "\"unique_id\", \"ssl\", \"netns\" or a number 0..255"}},
    {"AllowBadCidr", web("allow = [\"127.0.0.0/8\",\n  \"10.0.0.300/8\"]\n"),
     {"t.toml:5: route \"web\": allow: \"10.0.0.300/8\": not an IPv4 or IPv6 address"}},
    {"DenyBitsPastThePrefix", web("deny = [\"10.0.0.1/8\"]\n"),
     {"t.toml:4: route \"web\": deny: \"10.0.0.1/8\": bits are set past the prefix length "
      "(did you mean the network address?)"}},
    {"DenyNotAnArray", web("deny = \"10.0.0.0/8\"\n"),
     {"t.toml:4: route \"web\": deny must be an array of CIDR ranges such as [\"10.0.0.0/8\"], "
      "not \"10.0.0.0/8\""}},
    {"MaxConnectionsPerSourceNegative", web("max_connections_per_source = -1\n"),
     {"t.toml:4: route \"web\": max_connections_per_source must be 0..4294967295, not -1"}},
    {"ConnectionRateWithoutUnit", web("connection_rate_per_source = \"10\"\n"),
     {"t.toml:4: route \"web\": connection_rate_per_source must be a rate such as \"10/s\" "
      "(new connections per second), or 0, not \"10\""}},
    {"ConnectionRateAnInteger", web("connection_rate_per_source = 10\n"),
     {"t.toml:4: route \"web\": connection_rate_per_source must be a rate such as \"10/s\" "
      "(new connections per second), or 0, not 10"}},
    {"ConnectionBurstWithoutRate", web("connection_burst_per_source = 5\n"),
     {"t.toml:4: route \"web\": connection_burst_per_source needs connection_rate_per_source "
      "(the rate the bucket refills at)"}},
    {"SourcePrefixV4TooLong", web("source_prefix_v4 = 33\n"),
     {"t.toml:4: route \"web\": source_prefix_v4 must be 1..32, not 33"}},
    {"SourcePrefixV6Zero", web("source_prefix_v6 = 0\n"),
     {"t.toml:4: route \"web\": source_prefix_v6 must be 1..128, not 0"}},
    {"EngineAllowBadCidr", engine("allow = [\"::1/129\"]\n"),
     {"t.toml:2: [engine] allow: \"::1/129\": an IPv6 prefix has 0..128 bits"}},
    {"SourceTableTooSmall", engine("source_table_size = 4\n"),
     {"t.toml:2: [engine] source_table_size must be 8..16777216, not 4"}},
    {"OnMemberDownUnknown", web("on_member_down = \"reset\"\n"),
     {"t.toml:4: route \"web\": on_member_down must be keep or close, not \"reset\""}},
    {"SlowStartTooLong", web("slow_start = \"2h\"\n"),
     {"t.toml:4: route \"web\": slow_start must be 0..1h, not \"2h\""}},
    {"SlowStartWithMaglev", web("balance = \"maglev\"\nslow_start = \"10s\"\n"),
     {"t.toml:5: route \"web\": slow_start cannot be used with balance = maglev: a Maglev "
      "lookup table has no weight to ramp up (a member that comes up takes its clients back at "
      "once)"}},
    {"MemberSlowStartWithMaglev", web("balance = \"maglev\"\n", "  slow_start = \"1s\"\n"),
     {"t.toml:1: route \"web\": slow_start cannot be used with balance = maglev: a Maglev "
      "lookup table has no weight to ramp up (a member that comes up takes its clients back at "
      "once)"}},
    {"UpstreamSendProxyUnknown", web("", "  send_proxy = \"2\"\n"), {"t.toml:6: route \"web\": upstream send_proxy must be off, v1 or v2, not \"2\""}},

    // [[route.upstream]]
    {"UpstreamMissing", "[[route]]\nname = \"web\"\nlisten = \":1\"\n",
     {"t.toml:1: route \"web\": needs at least one upstream ([[route.upstream]] with an "
      "address)"}},
    {"UpstreamEmpty", "[[route]]\nname = \"web\"\nlisten = \":1\"\nupstream = []\n",
     {"t.toml:4: route \"web\": needs at least one upstream ([[route.upstream]] with an "
      "address)"}},
    {"UpstreamNotAnArray", "[[route]]\nname = \"web\"\nlisten = \":1\"\n"
                           "[route.upstream]\naddress = \":2\"\n",
     {"t.toml:4: route \"web\": upstream must be an array of tables (written "
      "[[route.upstream]]), not a table"}},
    {"UpstreamAddressMissing", "[[route]]\nname = \"web\"\nlisten = \":1\"\n"
                               "[[route.upstream]]\nweight = 2\n",
     {"t.toml:4: route \"web\": upstream address is required"}},
    {"UpstreamAddressBad", "[[route]]\nname = \"web\"\nlisten = \":1\"\n"
                           "[[route.upstream]]\naddress = \"[::1:80\"\n",
     {"t.toml:5: route \"web\": upstream address: bad address \"[::1:80\": missing ']' after "
      "IPv6 address (expected \"[addr]:port\")"}},
    {"UpstreamPortZero", "[[route]]\nname = \"web\"\nlisten = \":1\"\n"
                         "[[route.upstream]]\naddress = \"127.0.0.1:0\"\n",
     {"t.toml:5: route \"web\": upstream address \"127.0.0.1:0\" needs a port (0 is for "
      "listening only)"}},
    {"WeightZero", web("", "  weight = 0\n"),
     {"t.toml:6: route \"web\": upstream weight must be 1..1000, not 0"}},
    {"WeightTooLarge", web("", "  weight = 1001\n"),
     {"t.toml:6: route \"web\": upstream weight must be 1..1000, not 1001"}},
    {"BackupNotABool", web("", "  backup = \"yes\"\n"),
     {"t.toml:6: route \"web\": upstream backup must be true or false, not \"yes\""}},
    {"UpstreamMaxConnectionsNegative", web("", "  max_connections = -5\n"),
     {"t.toml:6: route \"web\": upstream max_connections must be 0 or more, not -5"}},
    {"UpstreamListedTwice", web("", "", "  [[route.upstream]]\n  address = \"127.0.0.1:9001\"\n"),
     {"t.toml:7: route \"web\": upstream \"127.0.0.1:9001\" is listed twice (first at line 5); "
      "give each a name to connect to one address twice"}},
    {"UpstreamNameUsedTwice", web("", "  name = \"db-1\"\n",
                                  "  [[route.upstream]]\n  address = \"127.0.0.1:9002\"\n"
                                  "  name = \"db-1\"\n"),
     {"t.toml:9: route \"web\": upstream name \"db-1\" is used twice (first at line 6)"}},
    {"UpstreamNameWithAColon", web("", "  name = \"db:1\"\n"),
     {"t.toml:6: route \"web\": upstream name must be 1..64 letters, digits, '-', '_' or '.', "
      "not \"db:1\""}},
    {"UpstreamUnknownKey", web("", "  wieght = 2\n"),
     {"t.toml:6: route \"web\": unknown key 'wieght' in [[route.upstream]] (did you mean "
      "'weight'?)"}},
    {"AllUpstreamsBackups", web("", "  backup = true\n",
                                "  [[route.upstream]]\n  address = \":3\"\n  backup = true\n"),
     {"t.toml:4: route \"web\": every upstream is a backup; at least one must not be (backups "
      "serve only while no other member is up)"}},

    // [route.health_check]
    {"HealthCheckNotATable", web("health_check = true\n"),
     {"t.toml:4: route \"web\": health_check must be a table, not true"}},
    {"HealthEnabledNotABool", web("", "", "  [route.health_check]\n  enabled = \"no\"\n"),
     {"t.toml:7: route \"web\": health_check enabled must be true or false, not \"no\""}},
    {"HealthIntervalZero", web("", "", "  [route.health_check]\n  interval = \"0\"\n"),
     {"t.toml:7: route \"web\": health_check interval must be 1ms..1h, not \"0\""}},
    {"HealthTimeoutTooLong", web("", "", "  [route.health_check]\n  timeout = \"2h\"\n"),
     {"t.toml:7: route \"web\": health_check timeout must be 1ms..1h, not \"2h\""}},
    {"RiseZero", web("", "", "  [route.health_check]\n  rise = 0\n"),
     {"t.toml:7: route \"web\": health_check rise must be 1..100, not 0"}},
    {"FallZero", web("", "", "  [route.health_check]\n  fall = 0\n"),
     {"t.toml:7: route \"web\": health_check fall must be 1..100, not 0"}},
    {"SendNotAString", web("", "", "  [route.health_check]\n  send = 5\n"),
     {"t.toml:7: route \"web\": health_check send must be a string, not 5"}},
    {"ExpectNotAString", web("", "", "  [route.health_check]\n  expect = true\n"),
     {"t.toml:7: route \"web\": health_check expect must be a string, not true"}},
    {"HealthUnknownKey", web("", "", "  [route.health_check]\n  intervall = \"1s\"\n"),
     {"t.toml:7: route \"web\": unknown key 'intervall' in [route.health_check] (did you "
      "mean 'interval'?)"}},

    // [route.passive_health]
    {"PassiveFallTooLarge", web("", "", "  [route.passive_health]\n  fall = 101\n"),
     {"t.toml:7: route \"web\": passive_health fall must be 0..100, not 101"}},
    {"PassiveBackoffZero", web("", "", "  [route.passive_health]\n  backoff = \"0\"\n"),
     {"t.toml:7: route \"web\": passive_health backoff must be 1ms..1h, not \"0\""}},
    {"MaxBackoffBelowBackoff",
     web("", "", "  [route.passive_health]\n  backoff = \"2s\"\n  max_backoff = \"1500ms\"\n"),
     {"t.toml:8: route \"web\": passive_health max_backoff (1500ms) must not be below backoff "
      "(2s)"}},
    {"PassiveUnknownKey", web("", "", "  [route.passive_health]\n  backof = \"2s\"\n"),
     {"t.toml:7: route \"web\": unknown key 'backof' in [route.passive_health] (did you mean "
      "'backoff'?)"}},
};
// clang-format on

INSTANTIATE_TEST_SUITE_P(Cases, ConfigFileError, ::testing::ValuesIn(kErrorCases),
                         [](const auto& info) { return info.param.name; });

TEST(ConfigFile, TopologyThatCannotBeReadIsAnError) {
    const TopologyReader broken = []() -> NumaTopology {
        throw std::runtime_error("/sys/devices/system/node: permission denied");
    };
    EXPECT_THAT(parse_config(engine("numa_nodes = \"0\"\n"), "t.toml", broken).errors,
                ElementsAre("t.toml:2: [engine] numa_nodes: /sys/devices/system/node: "
                            "permission denied"));
}

// Every mistake is reported, in the order of the file, not just the first.
TEST(ConfigFile, ReportsEveryErrorInLineOrder) {
    const std::string text = "[[route]]\n"                   // 1
                             "name = \"web\"\n"              // 2
                             "listen = \"nope\"\n"           // 3
                             "retries = -1\n"                // 4
                             "  [[route.upstream]]\n"        // 5
                             "  address = \"127.0.0.1:1\"\n" // 6
                             "  weight = 0\n"                // 7
                             "[[route]]\n"                   // 8
                             "name = \"web\"\n"              // 9
                             "listen = \":2\"\n"             // 10
                             "[engine]\n"                    // 11
                             "shards = -1\n";                // 12
    EXPECT_THAT(
        parse(text).errors,
        ElementsAre("t.toml:3: route \"web\": listen: bad address \"nope\": missing ':port' "
                    "(expected \"host:port\", \"[v6]:port\" or \"unix:path\")",
                    "t.toml:4: route \"web\": retries must be 0..100, not -1",
                    "t.toml:7: route \"web\": upstream weight must be 1..1000, not 0",
                    "t.toml:8: route \"web\": needs at least one upstream ([[route.upstream]] "
                    "with an address)",
                    "t.toml:9: route \"web\": name is already used by the route at line 1",
                    "t.toml:12: [engine] shards must be 0..4096, not -1"));
}

TEST(ConfigFile, SourceNameStartsEachLine) {
    EXPECT_THAT(parse_config("", "/etc/uring-fwd.toml").errors,
                ElementsAre("/etc/uring-fwd.toml:1: no routes: the file needs at least one "
                            "[[route]]"));
}

TEST(ConfigFile, ExampleFileIsValid) {
    const ConfigFileResult result = load_config_file(URING_FWD_EXAMPLE_CONFIG, fake_topology);
    EXPECT_THAT(result.errors, IsEmpty());
    ASSERT_TRUE(result.config.has_value());
    EXPECT_EQ(result.config->routes.size(), 5u);
}

TEST(ConfigFile, UnreadableFileIsOneError) {
    EXPECT_THAT(load_config_file("/nonexistent/uring-fwd.toml").errors,
                ElementsAre("/nonexistent/uring-fwd.toml: cannot read: No such file or "
                            "directory"));
    EXPECT_THAT(load_config_file("/").errors, ElementsAre("/: cannot read: not a regular file"));
}

TEST(Duration, Accepted) {
    EXPECT_EQ(parse_duration("0"), 0ms);
    EXPECT_EQ(parse_duration("0s"), 0ms);
    EXPECT_EQ(parse_duration("250ms"), 250ms);
    EXPECT_EQ(parse_duration("2s"), 2s);
    EXPECT_EQ(parse_duration("5m"), 5min);
    EXPECT_EQ(parse_duration("1h"), 1h);
    EXPECT_EQ(parse_duration("007s"), 7s);
}

TEST(Duration, RejectedWithAReason) {
    const std::pair<const char*, const char*> cases[] = {
        {"", "empty"},
        {"5", "has no unit (use ms, s, m or h; only 0 goes without)"},
        {"1.5s", "must be a whole number (use a smaller unit: 1500ms, not 1.5s)"},
        {"-1s", "must not be negative"},
        {"s", "must start with a whole number"},
        {" 5s", "must start with a whole number"},
        {"5x", "unknown unit \"x\" (use ms, s, m or h)"},
        {"5S", "unknown unit \"S\" (use ms, s, m or h)"},
        {"5s ", "unknown unit \"s \" (use ms, s, m or h)"},
        {"50us", "unknown unit \"us\" (use ms, s, m or h)"},
        {"9223372036854775807ms", "too large"},
        {"99999999999999999999999s", "too large"},
    };
    for (const auto& [text, reason] : cases) {
        std::string why;
        EXPECT_FALSE(parse_duration(text, &why).has_value()) << text;
        EXPECT_EQ(why, reason) << text;
    }
    EXPECT_FALSE(parse_duration("5").has_value()); // why is optional
}

TEST(Duration, MicrosecondsOnlyWhereAsked) {
    EXPECT_EQ(parse_duration_us("50us"), 50us);
    EXPECT_EQ(parse_duration_us("1ms"), 1000us);
    std::string why;
    EXPECT_FALSE(parse_duration_us("5", &why).has_value());
    EXPECT_EQ(why, "has no unit (use us, ms, s, m or h; only 0 goes without)");
}

TEST(Duration, FormatIsTheShortestExactForm) {
    EXPECT_EQ(format_duration(0us), "0");
    EXPECT_EQ(format_duration(50us), "50us");
    EXPECT_EQ(format_duration(1500ms), "1500ms");
    EXPECT_EQ(format_duration(90s), "90s");
    EXPECT_EQ(format_duration(2min), "2m");
    EXPECT_EQ(format_duration(24h), "24h");
}

} // namespace
} // namespace uringfwd
