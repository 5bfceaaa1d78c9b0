#include "uringfwd/stats.hpp"

#include <fmt/format.h>

#include <cerrno>

namespace uringfwd {

std::string_view to_string(CloseReason reason) {
    switch (reason) {
#define URINGFWD_CLOSE_NAME(arg, enumerator, name, help)                                           \
    case CloseReason::enumerator:                                                                  \
        return #name;
        URINGFWD_CLOSE_REASONS(URINGFWD_CLOSE_NAME, )
#undef URINGFWD_CLOSE_NAME
    }
    return "?";
}

std::string_view to_string(ConnectFailure failure) {
    switch (failure) {
#define URINGFWD_CONNECT_FAILURE_NAME(arg, enumerator, name, help)                                 \
    case ConnectFailure::enumerator:                                                               \
        return #name;
        URINGFWD_CONNECT_FAILURES(URINGFWD_CONNECT_FAILURE_NAME, )
#undef URINGFWD_CONNECT_FAILURE_NAME
    }
    return "other";
}

ConnectFailure connect_failure_of(int error) {
    switch (error) {
    case ECONNREFUSED:
        return ConnectFailure::Refused;
    // ECANCELED: the linked timeout cancelled the connect (upstream_connector.cpp).
    case ETIMEDOUT:
    case ECANCELED:
        return ConnectFailure::TimedOut;
    case EHOSTUNREACH:
    case ENETUNREACH:
    case ENETDOWN:
    case EHOSTDOWN:
    case EADDRNOTAVAIL:
    case ENOENT: // a Unix socket path that does not exist
        return ConnectFailure::Unreachable;
    default:
        return ConnectFailure::Other;
    }
}

uint64_t EngineStats::closed(CloseReason reason) const {
    switch (reason) {
#define URINGFWD_CLOSE_FIELD(arg, enumerator, name, help)                                          \
    case CloseReason::enumerator:                                                                  \
        return closed_##name;
        URINGFWD_CLOSE_REASONS(URINGFWD_CLOSE_FIELD, )
#undef URINGFWD_CLOSE_FIELD
    }
    return 0;
}

EngineStats& EngineStats::operator+=(const EngineStats& o) {
#define URINGFWD_STATS_ADD(name, kind, help) name += o.name;
    URINGFWD_COUNTERS(URINGFWD_STATS_ADD)
#undef URINGFWD_STATS_ADD
    return *this;
}

std::string EngineStats::to_line() const {
    std::string out;
    for_each([&out](const CounterInfo& info, uint64_t value) {
        fmt::format_to(std::back_inserter(out), "{}{}={}", out.empty() ? "" : " ", info.name,
                       value);
    });
    fmt::format_to(std::back_inserter(out), " cqes_per_enter={:.2f}", completions_per_enter());
    return out;
}

} // namespace uringfwd
