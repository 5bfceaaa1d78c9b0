// Why a connect to a pool member failed, counted per member (MemberStats::
// connect_failures) and in the `reason` label of uringfwd_upstream_connect_failures_total.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

// The one list of connect failure kinds: F(Enumerator, name, help), as
// URINGFWD_CLOSE_REASONS is for close reasons. `arg` is passed through to F untouched.
// The errno each kind stands for is connect_failure_of()'s (engine/api/stats.cpp).
#define URINGFWD_CONNECT_FAILURES(F, arg)                                                          \
    F(arg, Refused, refused, "ECONNREFUSED: nothing listens there")                                \
    F(arg, Unreachable, unreachable,                                                               \
      "EHOSTUNREACH, ENETUNREACH, EADDRNOTAVAIL, ...: no route to it, or no such Unix socket")     \
    F(arg, TimedOut, timed_out, "no answer within connect_timeout")                                \
    F(arg, Other, other, "any other error")

namespace uringfwd {

#define URINGFWD_CONNECT_FAILURE_ENUMERATOR(arg, enumerator, name, help) enumerator,
enum class ConnectFailure : uint8_t {
    URINGFWD_CONNECT_FAILURES(URINGFWD_CONNECT_FAILURE_ENUMERATOR, )
};
#undef URINGFWD_CONNECT_FAILURE_ENUMERATOR

#define URINGFWD_CONNECT_FAILURE_ONE(arg, enumerator, name, help) +1
inline constexpr std::size_t kConnectFailureCount =
    0 URINGFWD_CONNECT_FAILURES(URINGFWD_CONNECT_FAILURE_ONE, );
#undef URINGFWD_CONNECT_FAILURE_ONE

std::string_view to_string(ConnectFailure failure); // "refused", "unreachable", ...
ConnectFailure connect_failure_of(int error);       // from a positive errno

} // namespace uringfwd
