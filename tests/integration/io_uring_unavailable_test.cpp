// When io_uring cannot be used (blocked by seccomp, disabled by sysctl, absent), the
// binary says so in one line, says what to do, and exits non-zero. When only the
// provided-buffer ring is refused (a kernel before 5.19), auto forwards with splice
// alone and copy refuses to start.
#include "tests/support/binary_process.hpp"
#include "tests/support/exchange.hpp"
#include "tests/support/scripted_peer.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/transfer_checks.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <string>
#include <vector>

using namespace uringfwd::test;

namespace {

class IoUringUnavailable : public ::testing::TestWithParam<int> {};

std::string errno_name(const ::testing::TestParamInfo<int>& info) {
    return info.param == EPERM ? "EPERM" : "ENOSYS";
}

} // namespace

TEST_P(IoUringUnavailable, ExplainsAndExitsNonZero) {
    BinaryProcess process(WITHOUT_IO_URING_TOOL,
                          {std::to_string(GetParam()), uring_fwd_binary(), "--listen",
                           "127.0.0.1:0", "--upstream", "127.0.0.1:9"});
    auto status = process.wait_exit(Deadline{std::chrono::seconds(10)});
    ASSERT_TRUE(status) << "still running; stderr: " << process.stderr_text();
    EXPECT_TRUE(status->exited && status->code != 0) << status->describe();
    std::string err = process.stderr_text();
    EXPECT_NE(err.find("io_uring is unavailable"), std::string::npos) << err;
    EXPECT_NE(err.find("seccomp"), std::string::npos) << err;
    EXPECT_NE(err.find("io_uring_disabled"), std::string::npos) << err;
    EXPECT_EQ(err.find("listening on"), std::string::npos) << err;
    // One line: the whole message, newline-terminated.
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

INSTANTIATE_TEST_SUITE_P(Errors, IoUringUnavailable, ::testing::Values(EPERM, ENOSYS), errno_name);

namespace {

constexpr int kRegisterPbufRing = 22; // IORING_REGISTER_PBUF_RING

// The binary with io_uring_register(IORING_REGISTER_PBUF_RING) failing with EINVAL.
std::vector<std::string> without_buffer_ring(const std::string& upstream, const char* path) {
    return {"--register",
            std::to_string(kRegisterPbufRing),
            std::to_string(EINVAL),
            uring_fwd_binary(),
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            upstream,
            "--data-path",
            path};
}

} // namespace

TEST(BufferRingRefused, AutoWarnsOnceAndForwardsWithSplice) {
    ScriptedPeer sink{sink_plan()};
    BinaryProcess process(WITHOUT_IO_URING_TOOL,
                          without_buffer_ring(sink.endpoint().to_string(), "auto"));
    auto endpoint = process.wait_listening(Deadline{std::chrono::seconds(10)});
    ASSERT_TRUE(endpoint) << process.stderr_text();
    std::string err = process.stderr_text();
    EXPECT_NE(err.find("cannot register a provided-buffer ring"), std::string::npos) << err;
    EXPECT_NE(err.find("forwarding with splice only"), std::string::npos) << err;
    EXPECT_NE(err.find("data path splice"), std::string::npos) << err;

    UniqueFd client = connect_to(*endpoint);
    ExchangePlan plan;
    plan.send_bytes = 1 << 20;
    plan.send_seed = 5;
    EXPECT_TRUE(SentAll(exchange(client, plan, Deadline{std::chrono::seconds(10)}), 1 << 20));
    auto theirs = sink.wait_result(Deadline{std::chrono::seconds(10)});
    ASSERT_TRUE(theirs.has_value());
    EXPECT_TRUE(ReceivedPayload(*theirs, 5, 1 << 20));
}

TEST(BufferRingRefused, CopyExplainsAndExitsNonZero) {
    BinaryProcess process(WITHOUT_IO_URING_TOOL, without_buffer_ring("127.0.0.1:9", "copy"));
    auto status = process.wait_exit(Deadline{std::chrono::seconds(10)});
    ASSERT_TRUE(status) << "still running; stderr: " << process.stderr_text();
    EXPECT_TRUE(status->exited && status->code != 0) << status->describe();
    std::string err = process.stderr_text();
    EXPECT_NE(err.find("provided-buffer ring"), std::string::npos) << err;
    EXPECT_NE(err.find("5.19"), std::string::npos) << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}
