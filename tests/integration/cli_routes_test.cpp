// The binary's routes: a pool from repeated --upstream flags, a configuration file
// served as written, and SIGHUP reading the file again (a broken file changes nothing).
#include "tests/support/binary_process.hpp"
#include "tests/support/named_server.hpp"
#include "tests/support/pool_members.hpp"
#include "tests/support/proc_stats.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/temp_config_file.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <map>
#include <string>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

TEST(CliRoutes, RepeatedUpstreamIsAPool) {
    NamedServer a{'a'};
    NamedServer b{'b'};
    RunningBinary fwd = start_binary("127.0.0.1:0", a.endpoint(),
                                     {"--upstream", b.endpoint().to_string(), "--shards", "1",
                                      "--balance", "round-robin", "--retries", "1"});
    const std::map<char, int> seen = spread(fwd.endpoint, 20);
    EXPECT_EQ(seen.at('a'), 10);
    EXPECT_EQ(seen.at('b'), 10);
    EXPECT_NE(fwd.process->stderr_text().find(b.endpoint().to_string()), std::string::npos)
        << "the start-up line names every member:\n"
        << fwd.process->stderr_text();
}

std::string one_route(const std::string& listen, const Endpoint& member) {
    return fmt::format("[engine]\nshards = 1\n[[route]]\nname = \"web\"\nlisten = \"{}\"\n"
                       "  [[route.upstream]]\n  address = \"{}\"\n",
                       listen, member.to_string());
}

bool stderr_has(BinaryProcess& process, const std::string& text) {
    return eventually([&] { return process.stderr_text().find(text) != std::string::npos; },
                      Deadline{5s});
}

TEST(CliRoutes, SighupReadsTheFileAgainAndABrokenOneChangesNothing) {
    NamedServer a{'a'};
    NamedServer b{'b'};
    const std::string socket = unique_unix_path("sighup");
    const Endpoint at = Endpoint::parse("unix:" + socket);
    const ConfigFile file{one_route("unix:" + socket, a.endpoint())};
    BinaryProcess fwd{uring_fwd_binary(), {"--config", file.path()}};
    ASSERT_TRUE(fwd.wait_listening(Deadline{10s}).has_value()) << fwd.stderr_text();
    EXPECT_EQ(name_through(at, Deadline{5s}), 'a');

    file.write(one_route("unix:" + socket, b.endpoint()));
    fwd.signal(SIGHUP);
    ASSERT_TRUE(stderr_has(fwd, "SIGHUP: reloaded")) << fwd.stderr_text();
    EXPECT_EQ(name_through(at, Deadline{5s}), 'b');

    file.write("[[route]]\nname = \"web\"\nlisten = 5\n");
    fwd.signal(SIGHUP);
    ASSERT_TRUE(stderr_has(fwd, "still serving")) << fwd.stderr_text();
    EXPECT_NE(fwd.stderr_text().find(file.path() + ":3: "), std::string::npos) << fwd.stderr_text();
    EXPECT_EQ(name_through(at, Deadline{5s}), 'b');
}

TEST(CliRoutes, ConfigFileServesEveryRoute) {
    NamedServer a{'a'};
    NamedServer b{'b'};
    const std::string first = unique_unix_path("first");
    const std::string second = unique_unix_path("second");
    const ConfigFile file{fmt::format(
        "[[route]]\nname = \"first\"\nlisten = \"unix:{}\"\n"
        "  [[route.upstream]]\n  address = \"{}\"\n"
        "[[route]]\nname = \"second\"\nlisten = \"unix:{}\"\nbalance = \"least-active\"\n"
        "  [[route.upstream]]\n  address = \"{}\"\n",
        first, a.endpoint().to_string(), second, b.endpoint().to_string())};
    BinaryProcess fwd{uring_fwd_binary(), {"--config", file.path()}};
    ASSERT_TRUE(fwd.wait_listening(Deadline{10s}).has_value()) << fwd.stderr_text();
    EXPECT_EQ(name_through(Endpoint::parse("unix:" + first), Deadline{5s}), 'a');
    EXPECT_EQ(name_through(Endpoint::parse("unix:" + second), Deadline{5s}), 'b');
}

} // namespace
} // namespace uringfwd::test
