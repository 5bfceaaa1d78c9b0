// The binary's /metrics (--metrics): scraped over HTTP while connections are open, its
// values checked against traffic whose every byte is known (SHA-256-checked
// transfers through an echo server).
#include "tests/support/binary_process.hpp"
#include "tests/support/echo_server.hpp"
#include "tests/support/exchange.hpp"
#include "tests/support/metrics_scrape.hpp"
#include "tests/support/proc_stats.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/temp_config_file.hpp"
#include "tests/support/transfer_checks.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <signal.h>

#include <array>
#include <cstddef>
#include <map>
#include <string>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;
using Samples = std::map<std::string, double>;

struct Scraped {
    uint16_t port = 0;
    Samples last;
    // Scrapes until `settled` holds (the engine counts a connection as it finalizes it,
    // a moment after the client saw its end) or 10 s pass; the last scrape stays in
    // `last` for the assertions to explain.
    bool until(const std::function<bool(const Samples&)>& settled) {
        return eventually(
            [&] {
                last = parse_samples(scrape_metrics(port, Deadline{5s}));
                return settled(last);
            },
            Deadline{10s});
    }
};

TEST(Metrics, ScrapeDuringTrafficCountsKnownTraffic) {
    EchoServer echo;
    RunningBinary fwd =
        start_binary("127.0.0.1:0", echo.endpoint(), {"--shards", "2", "--metrics", "127.0.0.1:0"});
    Scraped m;
    const auto port = metrics_port(*fwd.process, Deadline{5s});
    ASSERT_TRUE(port.has_value()) << fwd.process->stderr_text();
    m.port = *port;

    // Open across every scrape below: a connection in flight.
    UniqueFd held = connect_to(fwd.endpoint);
    ASSERT_EQ(send_text(held.get(), "ping", Deadline{5s}).status, IoStatus::Ok);
    std::array<std::byte, 4> pong{};
    ASSERT_EQ(recv_all(held.get(), pong, Deadline{5s}).status, IoStatus::Ok);

    constexpr int kTransfers = 2;
    constexpr uint64_t kSize = 512 * 1024;
    for (int i = 0; i < kTransfers; ++i) {
        UniqueFd client = connect_to(fwd.endpoint);
        const ExchangeResult r = exchange(client, source_plan(kSize, 7 + i), Deadline{30s});
        ASSERT_TRUE(SentAll(r, kSize)) << r.describe();
        ASSERT_TRUE(ReceivedPayload(r, 7 + i, kSize)) << r.describe(); // echoed intact
    }

    const double moved = kTransfers * kSize;
    const std::string to_up = "direction=\"to_upstream\"";
    const std::string to_client = "direction=\"to_client\"";
    const bool settled = m.until([&](const Samples& s) {
        return sum_of(s, "uringfwd_route_connections_closed_total", "reason=\"clean\"") ==
                   kTransfers &&
               sum_of(s, "uringfwd_shard_to_client_bytes_total") == moved + 4;
    });
    EXPECT_TRUE(settled) << "last scrape never showed both transfers closed";
    const Samples& s = m.last;
    EXPECT_EQ(sum_of(s, "uringfwd_route_connections_accepted_total"), kTransfers + 1);
    EXPECT_EQ(sum_of(s, "uringfwd_shard_accepted_total"), kTransfers + 1);
    EXPECT_EQ(sum_of(s, "uringfwd_route_connections_active"), 1);
    EXPECT_EQ(sum_of(s, "uringfwd_shard_active"), 1);
    EXPECT_EQ(sum_of(s, "uringfwd_route_connections_closed_total"), kTransfers);
    // Per route and member: bytes of closed connections, exactly the transfers'.
    EXPECT_EQ(sum_of(s, "uringfwd_route_forwarded_bytes_total", to_up), moved);
    EXPECT_EQ(sum_of(s, "uringfwd_route_forwarded_bytes_total", to_client), moved);
    const std::string member = "upstream=\"" + echo.endpoint().to_string() + "\"";
    EXPECT_EQ(sum_of(s, "uringfwd_upstream_forwarded_bytes_total", member), 2 * moved);
    EXPECT_EQ(sum_of(s, "uringfwd_upstream_connects_total", member), kTransfers + 1);
    EXPECT_EQ(sum_of(s, "uringfwd_upstream_connect_failures_total"), 0);
    EXPECT_EQ(sum_of(s, "uringfwd_upstream_up", member), 1);
    // Per shard, live: the open connection's ping counts already.
    EXPECT_EQ(sum_of(s, "uringfwd_shard_to_upstream_bytes_total"), moved + 4);
    // One observation per closed connection, summed over the two shards.
    EXPECT_EQ(sum_of(s, "uringfwd_connection_duration_seconds_count"), kTransfers);
    EXPECT_EQ(sum_of(s, "uringfwd_connection_duration_seconds_bucket", "le=\"+Inf\""), kTransfers);
    EXPECT_EQ(sum_of(s, "uringfwd_upstream_connect_seconds_count"), kTransfers);
    EXPECT_EQ(sum_of(s, "uringfwd_shard_info"), 2);
    EXPECT_EQ(sum_of(s, "uringfwd_build_info"), 1);
    held.reset(); // or the binary's stop would wait for it to drain
}

TEST(Metrics, ConnectFailuresCountedPerMemberAndReason) {
    EchoServer echo;
    ReservedPort refusing = reserve_refusing_port();
    RunningBinary fwd =
        start_binary("127.0.0.1:0", refusing.endpoint,
                     {"--upstream", echo.endpoint().to_string(), "--shards", "1", "--retries", "1",
                      "--balance", "round-robin", "--metrics", "127.0.0.1:0"});
    Scraped m;
    const auto port = metrics_port(*fwd.process, Deadline{5s});
    ASSERT_TRUE(port.has_value()) << fwd.process->stderr_text();
    m.port = *port;

    // Round-robin starts at the refusing member: the first client is refused there and
    // served by the echo server on its retry.
    UniqueFd client = connect_to(fwd.endpoint);
    const ExchangeResult r = exchange(client, source_plan(1000, 3), Deadline{10s});
    ASSERT_TRUE(ReceivedPayload(r, 3, 1000)) << r.describe();

    const std::string bad = "upstream=\"" + refusing.endpoint.to_string() + "\"";
    const std::string good = "upstream=\"" + echo.endpoint().to_string() + "\"";
    EXPECT_TRUE(m.until([&](const Samples& s) {
        return sum_of(s, "uringfwd_route_connections_closed_total", "reason=\"clean\"") == 1;
    }));
    const Samples& s = m.last;
    EXPECT_EQ(sum_of(s, "uringfwd_upstream_connect_failures_total", bad + "}"), 1);
    EXPECT_EQ(sum_of(s, "uringfwd_upstream_connect_failures_total", "reason=\"refused\""), 1);
    EXPECT_EQ(sum_of(s, "uringfwd_upstream_connect_failures_total", good + "}"), 0);
    EXPECT_EQ(sum_of(s, "uringfwd_shard_upstream_failures_total"), 1);
    EXPECT_EQ(sum_of(s, "uringfwd_upstream_connects_total", good), 1);
    EXPECT_EQ(sum_of(s, "uringfwd_upstream_forwarded_bytes_total", good), 2000);
    EXPECT_EQ(sum_of(s, "uringfwd_upstream_forwarded_bytes_total", bad), 0);
}

// [engine] metrics from the file, served; a SIGHUP that changes it says it waits for a
// restart and the endpoint keeps serving.
TEST(Metrics, FromTheConfigFileAndKeptOverSighup) {
    EchoServer echo;
    const auto file_text = [&](const std::string& metrics) {
        return fmt::format("[engine]\nshards = 1\nmetrics = \"{}\"\n[[route]]\nname = \"web\"\n"
                           "listen = \"127.0.0.1:0\"\n  [[route.upstream]]\n  address = \"{}\"\n",
                           metrics, echo.endpoint().to_string());
    };
    const ConfigFile file{file_text("127.0.0.1:0")};
    BinaryProcess fwd{uring_fwd_binary(), {"--config", file.path()}};
    ASSERT_TRUE(fwd.wait_listening(Deadline{10s}).has_value()) << fwd.stderr_text();
    const auto port = metrics_port(fwd, Deadline{5s});
    ASSERT_TRUE(port.has_value()) << fwd.stderr_text();
    EXPECT_EQ(sum_of(parse_samples(scrape_metrics(*port, Deadline{5s})),
                     "uringfwd_route_connections_accepted_total", "route=\"web\""),
              0);

    file.write(file_text("127.0.0.1:1"));
    fwd.signal(SIGHUP);
    EXPECT_TRUE(
        eventually([&] { return fwd.stderr_text().find("until a restart") != std::string::npos; },
                   Deadline{5s}))
        << fwd.stderr_text();
    EXPECT_NE(scrape_metrics(*port, Deadline{5s}).find("uringfwd_build_info"), std::string::npos);
}

// Two members at one address, told apart by their names: two series, one sample each
// (the issue: two unnamed members of one address were two samples of one series).
TEST(Metrics, NamedMembersOfOneAddressAreTwoSeries) {
    EchoServer echo;
    const ConfigFile file{
        fmt::format("[engine]\nshards = 1\nmetrics = \"127.0.0.1:0\"\n[[route]]\nname = \"d\"\n"
                    "listen = \"127.0.0.1:0\"\n  [[route.upstream]]\n  address = \"{0}\"\n  name = "
                    "\"db-1\"\n  [[route.upstream]]\n  address = \"{0}\"\n  name = \"db-2\"\n",
                    echo.endpoint().to_string())};
    BinaryProcess fwd{uring_fwd_binary(), {"--config", file.path()}};
    const std::optional<Endpoint> at = fwd.wait_listening(Deadline{10s});
    ASSERT_TRUE(at) << fwd.stderr_text();
    const auto port = metrics_port(fwd, Deadline{5s});
    ASSERT_TRUE(port) << fwd.stderr_text();
    for (int i = 0; i < 4; ++i) { // round-robin: two each
        UniqueFd fd = connect_to(*at);
        ASSERT_EQ(send_text(fd.get(), "ping", Deadline{5s}).status, IoStatus::Ok);
        std::array<std::byte, 4> pong{};
        ASSERT_EQ(recv_all(fd.get(), pong, Deadline{5s}).status, IoStatus::Ok);
    }
    Scraped m{*port, {}};
    EXPECT_TRUE(m.until([](const Samples& s) {
        return s.count("uringfwd_upstream_connects_total{route=\"d\",upstream=\"db-1\"}") == 1 &&
               s.count("uringfwd_upstream_connects_total{route=\"d\",upstream=\"db-2\"}") == 1 &&
               sum_of(s, "uringfwd_upstream_connects_total", "route=\"d\"") == 4;
    }));
    EXPECT_EQ(m.last["uringfwd_upstream_connects_total{route=\"d\",upstream=\"db-1\"}"], 2);
    EXPECT_EQ(m.last["uringfwd_upstream_connects_total{route=\"d\",upstream=\"db-2\"}"], 2);
}

// A connection held open, with a ping echoed through it: it reached its upstream.
UniqueFd held_open(const Endpoint& at) {
    UniqueFd fd = connect_to(at);
    EXPECT_EQ(send_text(fd.get(), "ping", Deadline{5s}).status, IoStatus::Ok);
    std::array<std::byte, 4> pong{};
    EXPECT_EQ(recv_all(fd.get(), pong, Deadline{5s}).status, IoStatus::Ok);
    return fd;
}

// A reload that removes a route, and a member of another, while each has a connection
// open: their series stay, with those connections active, until the connections end
// (they vanished at the reload, connections and all).
TEST(Metrics, SeriesOfRemovedRoutesAndMembersStayWhileTheyDrain) {
    EchoServer a;
    EchoServer b;
    EchoServer c;
    const std::string web = unique_unix_path("metrics-web");
    const std::string gone = unique_unix_path("metrics-gone");
    const auto route = [](const std::string& name, const std::string& path, const char* member,
                          const EchoServer& upstream) {
        return fmt::format("[[route]]\nname = \"{}\"\nlisten = \"unix:{}\"\n  "
                           "[[route.upstream]]\n  name = \"{}\"\n  address = \"{}\"\n",
                           name, path, member, upstream.endpoint().to_string());
    };
    const std::string engine = "[engine]\nshards = 1\nmetrics = \"127.0.0.1:0\"\n";
    const ConfigFile file{engine + route("web", web, "a", a) + route("gone", gone, "c", c)};
    BinaryProcess fwd{uring_fwd_binary(), {"--config", file.path()}};
    ASSERT_TRUE(fwd.wait_listening(Deadline{10s})) << fwd.stderr_text();
    const auto port = metrics_port(fwd, Deadline{5s});
    ASSERT_TRUE(port) << fwd.stderr_text();
    UniqueFd on_web = held_open(Endpoint::parse("unix:" + web));
    UniqueFd on_gone = held_open(Endpoint::parse("unix:" + gone));

    file.write(engine + route("web", web, "b", b));
    fwd.signal(SIGHUP);
    ASSERT_TRUE(
        eventually([&] { return fwd.stderr_text().find("SIGHUP: reloaded") != std::string::npos; },
                   Deadline{5s}))
        << fwd.stderr_text();
    const std::string web_a = "{route=\"web\",upstream=\"a\"}";
    const std::string web_b = "{route=\"web\",upstream=\"b\"}";
    const std::string gone_c = "{route=\"gone\",upstream=\"c\"}";
    Scraped m{*port, {}};
    EXPECT_TRUE(m.until([&](const Samples& s) {
        return s.count("uringfwd_upstream_connections_active" + web_b) == 1;
    }));
    EXPECT_EQ(m.last["uringfwd_route_connections_active{route=\"web\"}"], 1);
    EXPECT_EQ(m.last["uringfwd_route_connections_active{route=\"gone\"}"], 1);
    EXPECT_EQ(m.last["uringfwd_upstream_connections_active" + web_a], 1);
    EXPECT_EQ(m.last["uringfwd_upstream_connects_total" + web_a], 1);
    EXPECT_EQ(m.last["uringfwd_upstream_connections_active" + web_b], 0);
    EXPECT_EQ(m.last["uringfwd_upstream_connections_active" + gone_c], 1);
    EXPECT_EQ(m.last["uringfwd_upstream_up" + web_b], 1);

    // Drained: the removed route and member go.
    on_web.reset();
    on_gone.reset();
    EXPECT_TRUE(m.until([&](const Samples& s) {
        return s.count("uringfwd_upstream_connections_active" + web_a) == 0 &&
               s.count("uringfwd_route_connections_active{route=\"gone\"}") == 0;
    })) << "still served after their connections closed";
    EXPECT_EQ(m.last.count("uringfwd_upstream_connections_active" + gone_c), 0u);
    EXPECT_EQ(m.last["uringfwd_route_connections_active{route=\"web\"}"], 0);
    EXPECT_EQ(m.last.count("uringfwd_upstream_connections_active" + web_b), 1u);
}

// Without names the same address twice is refused, from flags as from a file.
TEST(Metrics, OneAddressTwiceInAPoolIsRefused) {
    EchoServer echo;
    BinaryProcess fwd{uring_fwd_binary(),
                      {"--listen", "127.0.0.1:0", "--upstream", echo.endpoint().to_string(),
                       "--upstream", echo.endpoint().to_string()}};
    const auto status = fwd.wait_exit(Deadline{5s});
    ASSERT_TRUE(status.has_value()) << fwd.stderr_text();
    EXPECT_TRUE(status->exited && status->code == 1) << status->describe();
    EXPECT_NE(fwd.stderr_text().find("upstream " + echo.endpoint().to_string() +
                                     " is listed twice; give each a name"),
              std::string::npos)
        << fwd.stderr_text();
}

TEST(Metrics, BadAddressIsOneLineError) {
    BinaryProcess fwd{
        uring_fwd_binary(),
        {"--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:9", "--metrics", "unix:/tmp/x"}};
    const auto status = fwd.wait_exit(Deadline{5s});
    ASSERT_TRUE(status.has_value());
    EXPECT_TRUE(status->exited && status->code == 1) << status->describe();
    EXPECT_NE(fwd.stderr_text().find("--metrics"), std::string::npos) << fwd.stderr_text();
}

// civetweb's bind fails with "null context when constructing CivetServer"; the
// operator hears what went wrong instead, in one line.
TEST(Metrics, APortInUseSaysSo) {
    const Listener taken = listen_loopback(Family::Inet4);
    BinaryProcess fwd{uring_fwd_binary(),
                      {"--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:9", "--metrics",
                       taken.endpoint().to_string()}};
    const auto status = fwd.wait_exit(Deadline{5s});
    ASSERT_TRUE(status.has_value()) << fwd.stderr_text();
    EXPECT_TRUE(status->exited && status->code == 1) << status->describe();
    const std::string err = fwd.stderr_text();
    EXPECT_NE(err.find("cannot serve metrics on " + taken.endpoint().to_string() +
                       ": Address already in use\n"),
              std::string::npos)
        << err;
    EXPECT_EQ(err.find("CivetServer"), std::string::npos) << err;
}

// A scraper pointed at a wrong path hears 404, not the metrics: civetweb alone served
// /metrics/x and /metricsx too.
TEST(Metrics, OnlyTheMetricsPathAnswers) {
    RunningBinary fwd = start_binary("127.0.0.1:0", Endpoint::parse("127.0.0.1:9"),
                                     {"--shards", "1", "--metrics", "127.0.0.1:0"});
    const auto port = metrics_port(*fwd.process, Deadline{5s});
    ASSERT_TRUE(port.has_value()) << fwd.process->stderr_text();
    EXPECT_EQ(http_status(*port, "/metrics", Deadline{5s}), 200);
    EXPECT_EQ(http_status(*port, "/metrics?name=x", Deadline{5s}), 200);
    for (const char* path : {"/", "/metrics/", "/metrics/x", "/metricsx", "/favicon.ico", "/x"})
        EXPECT_EQ(http_status(*port, path, Deadline{5s}), 404) << path;
}

} // namespace
} // namespace uringfwd::test
