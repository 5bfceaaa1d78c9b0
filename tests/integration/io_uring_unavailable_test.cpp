// When io_uring cannot be used (blocked by seccomp, disabled by sysctl, absent), the
// binary says so in one line, says what to do, and exits non-zero.
#include "tests/support/binary_process.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

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
