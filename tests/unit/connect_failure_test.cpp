// The connect failure kinds (connect_failure.hpp): one name each, the metric label
// values uringfwd_upstream_connect_failures_total uses, and the errno each stands for.
#include "uringfwd/connect_failure.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <set>
#include <string>

namespace uringfwd {
namespace {

TEST(ConnectFailure, EveryKindHasItsOwnName) {
    std::set<std::string> names;
    for (std::size_t i = 0; i < kConnectFailureCount; ++i)
        names.insert(std::string(to_string(static_cast<ConnectFailure>(i))));
    EXPECT_EQ(names, (std::set<std::string>{"refused", "unreachable", "timed_out", "other"}));
}

TEST(ConnectFailure, EachErrnoIsCountedAsItsKind) {
    EXPECT_EQ(connect_failure_of(ECONNREFUSED), ConnectFailure::Refused);
    // ECANCELED: the connect's linked timeout cancelled it.
    EXPECT_EQ(connect_failure_of(ETIMEDOUT), ConnectFailure::TimedOut);
    EXPECT_EQ(connect_failure_of(ECANCELED), ConnectFailure::TimedOut);
    for (int error : {EHOSTUNREACH, ENETUNREACH, ENETDOWN, EHOSTDOWN, EADDRNOTAVAIL, ENOENT})
        EXPECT_EQ(connect_failure_of(error), ConnectFailure::Unreachable) << error;
    EXPECT_EQ(connect_failure_of(EACCES), ConnectFailure::Other);
}

} // namespace
} // namespace uringfwd
