// What the binary says: every line of its own in the engine's format (time, level,
// "uring-fwd: "), counts in the right number, and the exit said in one line.
#include "tests/support/binary_process.hpp"
#include "tests/support/echo_server.hpp"
#include "tests/support/proc_stats.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/temp_config_file.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;

// "listening on ..." has been printed: the start line.
std::unique_ptr<BinaryProcess> started(std::vector<std::string> args) {
    auto fwd = std::make_unique<BinaryProcess>(uring_fwd_binary(), std::move(args));
    EXPECT_TRUE(fwd->wait_listening(Deadline{10s})) << fwd->stderr_text();
    return fwd;
}

TEST(CliMessages, StartLineCountsOneShardInTheSingular) {
    EchoServer echo;
    auto fwd = started(
        {"--listen", "127.0.0.1:0", "--upstream", echo.endpoint().to_string(), "--shards", "1"});
    const std::string err = fwd->stderr_text();
    EXPECT_NE(err.find("; 1 shard (node "), std::string::npos) << err;
    EXPECT_EQ(err.find("1 shards"), std::string::npos) << err;
}

} // namespace
} // namespace uringfwd::test
