// The route flags say what the configuration file says, the same way: one duration
// syntax, --listen several times, --dual-stack, and the flags that only mean something
// beside another (--inspect-timeout, --trusted-sources) refused alone, as an upgrade
// socket path is by one rule.
#include "tests/support/binary_process.hpp"
#include "tests/support/echo_server.hpp"
#include "tests/support/exchange.hpp"
#include "tests/support/payload.hpp"
#include "tests/support/scripted_peer.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/temp_config_file.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

// The binary with `args`, which must exit within 5 s: its status and stderr.
std::pair<ExitStatus, std::string> run_to_exit(std::vector<std::string> args) {
    BinaryProcess proc{uring_fwd_binary(), std::move(args)};
    const std::optional<ExitStatus> status = proc.wait_exit(Deadline{5s});
    if (!status) {
        ADD_FAILURE() << "still running after 5 s; stderr:\n" << proc.stderr_text();
        return {};
    }
    std::this_thread::sleep_for(50ms);
    return {*status, proc.stderr_text()};
}

void expect_refused(std::vector<std::string> args, const std::string& message) {
    const auto [status, err] = run_to_exit(std::move(args));
    EXPECT_TRUE(status.exited && status.code != 0) << status.describe();
    EXPECT_NE(err.find(message), std::string::npos) << err;
    EXPECT_EQ(err.find('\n'), err.size() - 1) << "one line: " << err;
}

std::vector<std::string> route(const Endpoint& upstream, std::vector<std::string> extra) {
    std::vector<std::string> args{"--listen", "127.0.0.1:0", "--upstream", upstream.to_string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
}

bool echoes(const Endpoint& at) {
    UniqueFd fd = connect_to(at, 5000ms);
    const ExchangeResult r = exchange(fd, source_plan(4096, 7), Deadline{5s});
    return r.received == 4096 && r.received_sha256 == payload_sha256(7, 4096);
}

// "listening on A B, forwarding to ..." of the start line: every address.
std::vector<Endpoint> listening_on(const std::string& err) {
    const std::string marker = "listening on ";
    const std::size_t begin = err.find(marker);
    const std::size_t end = err.find(", forwarding", begin);
    std::vector<Endpoint> out;
    if (begin == std::string::npos || end == std::string::npos)
        return out;
    std::istringstream words(err.substr(begin + marker.size(), end - begin - marker.size()));
    for (std::string word; words >> word;)
        out.push_back(Endpoint::parse(word));
    return out;
}

// The file's syntax on a flag: "1h" and "1m" were refused, a bare number meant ms.
TEST(CliFlags, DurationsTakeTheFilesSyntax) {
    EchoServer echo;
    BinaryProcess fwd{uring_fwd_binary(),
                      route(echo.endpoint(), {"--idle-timeout", "1h", "--connect-timeout", "1m",
                                              "--drain-timeout", "2m", "--busy-poll", "50us"})};
    const std::optional<Endpoint> at = fwd.wait_listening(Deadline{10s});
    ASSERT_TRUE(at) << fwd.stderr_text();
    EXPECT_TRUE(echoes(*at));
}

// ... and means it: a silent client and a silent upstream are closed after 300ms.
TEST(CliFlags, IdleTimeoutWithAUnitClosesAnIdleConnection) {
    SilentServer upstream;
    BinaryProcess fwd{uring_fwd_binary(), route(upstream.endpoint(), {"--idle-timeout", "300ms"})};
    const std::optional<Endpoint> at = fwd.wait_listening(Deadline{10s});
    ASSERT_TRUE(at) << fwd.stderr_text();
    UniqueFd client = connect_to(*at);
    const auto start = Clock::now();
    EXPECT_TRUE(recv_until_eof(client.get(), Deadline{5s}).ended_by_peer());
    EXPECT_GE(Clock::now() - start, 250ms);
}

// A number without a unit is refused by every duration flag, saying to add one, as the
// file refuses it.
TEST(CliFlags, ADurationWithoutAUnitIsRefused) {
    for (const char* flag :
         {"--idle-timeout", "--connect-timeout", "--drain-timeout", "--busy-poll", "--bulk-park"})
        expect_refused(route(Endpoint::parse("127.0.0.1:1"), {flag, "500"}),
                       std::string(flag) + ": \"500\" has no unit");
    expect_refused(
        route(Endpoint::parse("127.0.0.1:1"), {"--accept-proxy", "--inspect-timeout", "3"}),
        "--inspect-timeout: \"3\" has no unit");
    expect_refused(route(Endpoint::parse("127.0.0.1:1"), {"--connect-timeout", "2h"}),
                   "--connect-timeout: must be 1ms..1h, not \"2h\"");
}

TEST(CliFlags, HelpShowsDurationsReadably) {
    BinaryProcess proc{uring_fwd_binary(), {"--help"}};
    ASSERT_TRUE(proc.wait_exit(Deadline{5s}));
    std::this_thread::sleep_for(50ms);
    const std::string help = proc.stdout_text();
    EXPECT_NE(help.find("--idle-timeout DURATION=0"), std::string::npos) << help;
    EXPECT_NE(help.find("--drain-timeout DURATION=30s"), std::string::npos) << help;
    EXPECT_EQ(help.find("[UNIT]"), std::string::npos) << help;
}

// A size_t flag took "-5" as 2^64 - 5 (CLI11 wraps it): a negative limit is a mistake.
TEST(CliFlags, ANegativeConnectionLimitIsRefused) {
    expect_refused(route(Endpoint::parse("127.0.0.1:1"), {"--max-connections", "-5"}),
                   "--max-connections: must be 0 or more, not \"-5\"");
}

// Both read only what --accept-proxy reads: alone, each is a mistake.
TEST(CliFlags, InspectTimeoutAndTrustedSourcesNeedAcceptProxy) {
    expect_refused(route(Endpoint::parse("127.0.0.1:1"), {"--inspect-timeout", "2s"}),
                   "--inspect-timeout needs --accept-proxy");
    expect_refused(route(Endpoint::parse("127.0.0.1:1"), {"--trusted-sources", "10.0.0.0/8"}),
                   "--trusted-sources needs --accept-proxy");
}

// The file refuses a relative upgrade_socket; the flag now says the same.
TEST(CliFlags, ARelativeUpgradeSocketIsRefusedLikeInTheFile) {
    expect_refused(route(Endpoint::parse("127.0.0.1:1"), {"--upgrade-socket", "rel.sock"}),
                   "--upgrade-socket must be an absolute path of at most 107 bytes, not "
                   "\"rel.sock\"");
    const ConfigFile file{"[engine]\nupgrade_socket = \"rel.sock\"\n[[route]]\nname = \"a\"\n"
                          "listen = \":1\"\n[[route.upstream]]\naddress = \"127.0.0.1:2\"\n"};
    const auto [status, err] = run_to_exit({"--config", file.path(), "--check"});
    EXPECT_NE(err.find("upgrade_socket must be an absolute path of at most 107 bytes, not "
                       "\"rel.sock\""),
              std::string::npos)
        << err;
}

// Settings each valid on its own line but not together: --check refused them only
// when the engine started (validate() was not asked), so a checked file could fail to
// start.
TEST(CliFlags, CheckRefusesSettingsThatContradictEachOther) {
    const ConfigFile file{"[engine]\nbulk_park = \"20ms\"\nsplice_mechanism = \"inline\"\n"
                          "[[route]]\nname = \"a\"\nlisten = \"127.0.0.1:0\"\n"
                          "[[route.upstream]]\naddress = \"127.0.0.1:2\"\n"};
    const auto [status, err] = run_to_exit({"--config", file.path(), "--check"});
    EXPECT_TRUE(status.exited && status.code == 1) << status.describe() << err;
    EXPECT_NE(err.find(file.path() + ": splice_mechanism = \"inline\" cannot be had with "
                                     "bulk_park"),
              std::string::npos)
        << err;
}

// -l A -l B: one route listening on both (exit 114 "missing its value" before).
TEST(CliFlags, ListenGivenTwiceServesBoth) {
    EchoServer echo;
    BinaryProcess fwd{uring_fwd_binary(),
                      {"--listen", "127.0.0.1:0", "--listen", "127.0.0.1:0", "--upstream",
                       echo.endpoint().to_string()}};
    ASSERT_TRUE(fwd.wait_listening(Deadline{10s})) << fwd.stderr_text();
    const std::vector<Endpoint> both = listening_on(fwd.stderr_text());
    ASSERT_EQ(both.size(), 2u) << fwd.stderr_text();
    EXPECT_NE(both[0], both[1]);
    for (const Endpoint& at : both)
        EXPECT_TRUE(echoes(at)) << at.to_string();
}

// [::]:PORT is IPv6 only unless --dual-stack: then an IPv4 client reaches it too.
TEST(CliFlags, DualStackLetsTheIpv6WildcardTakeIpv4Clients) {
    if (!ipv6_loopback_available())
        GTEST_SKIP() << "no IPv6 here";
    EchoServer echo;
    for (const bool dual : {false, true}) {
        std::vector<std::string> args{"--listen", "[::]:0", "--upstream",
                                      echo.endpoint().to_string()};
        if (dual)
            args.push_back("--dual-stack");
        BinaryProcess fwd{uring_fwd_binary(), args};
        const std::optional<Endpoint> at = fwd.wait_listening(Deadline{10s});
        ASSERT_TRUE(at) << fwd.stderr_text();
        EXPECT_TRUE(echoes(Endpoint{Endpoint::Kind::Inet6, "::1", at->port})) << dual;
        UniqueFd v4;
        const int err =
            try_connect(Endpoint{Endpoint::Kind::Inet, "127.0.0.1", at->port}, 2000ms, v4);
        if (dual) {
            EXPECT_EQ(err, 0);
            EXPECT_TRUE(echoes(Endpoint{Endpoint::Kind::Inet, "127.0.0.1", at->port}));
        } else {
            EXPECT_EQ(err, ECONNREFUSED) << "IPv4 reached an IPv6-only [::]";
        }
    }
}

} // namespace
} // namespace uringfwd::test
