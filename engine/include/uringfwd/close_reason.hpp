// Why a connection ended. Every connection ends with exactly one reason, counted per
// reason in EngineStats (closed_<name>).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

// The one list of close reasons: R(Enumerator, name, help). `arg` is passed through to
// R untouched, so the counter list (counter_list.hpp) can turn each reason into a
// counter without declaring it again.
#define URINGFWD_CLOSE_REASONS(R, arg)                                                             \
    R(arg, Clean, clean, "both directions ended with FIN and every byte was delivered")            \
    R(arg, ClientReset, client_reset, "the client reset the connection or a read/write failed")    \
    R(arg, UpstreamReset, upstream_reset,                                                          \
      "the upstream reset the connection or a read/write failed")                                  \
    R(arg, Refused, refused, "the upstream refused the connection or was unreachable")             \
    R(arg, ConnectTimeout, connect_timeout, "the upstream did not accept within connect_timeout")  \
    R(arg, NoUpstream, no_upstream, "no member of the route's pool was up and had room")           \
    R(arg, Rejected, rejected, "the route's selector rejected the client")                         \
    R(arg, NoRoute, no_route,                                                                      \
      "no route of the listen address matched the TLS server name or ALPN and none is default")    \
    R(arg, TlsMalformed, tls_malformed,                                                            \
      "a listener routing by server name read a TLS handshake record that is no valid "            \
      "ClientHello")                                                                               \
    R(arg, IdleTimeout, idle_timeout, "no byte in either direction for the route's idle_timeout")  \
    R(arg, MaxDuration, max_duration, "open longer than the route's max_duration")                 \
    R(arg, DrainTimeout, drain_timeout, "still open when the drain after stop() ran out")          \
    R(arg, Stopped, stopped, "reset by a stop without drain")                                      \
    R(arg, Admin, admin, "reset by Engine::close_connection(s) (the control socket's close)")      \
    R(arg, MemberDown, member_down,                                                                \
      "reset as its route's on_member_down = close says: its member went down or was removed")     \
    R(arg, LocalError, local_error,                                                                \
      "the engine could not serve it (no socket for the upstream, an unexpected result)")          \
    R(arg, InspectTimeout, inspect_timeout,                                                        \
      "the client did not send its preamble (PROXY header, ClientHello) within inspect_timeout")   \
    R(arg, InspectIncomplete, inspect_incomplete,                                                  \
      "the client closed the connection before its preamble was complete")                         \
    R(arg, InspectOversized, inspect_oversized,                                                    \
      "the client's preamble was larger than the engine reads (16 KiB, or its protocol's limit)")  \
    R(arg, ProxyUntrusted, proxy_untrusted,                                                        \
      "accept_proxy: the client is not in the route's trusted_sources")                            \
    R(arg, ProxyInvalid, proxy_invalid,                                                            \
      "accept_proxy: the client did not start with a valid PROXY v1/v2 header")                    \
    R(arg, Denied, denied, "the route's allow/deny lists do not let the client's address in")      \
    R(arg, SourceLimit, source_limit,                                                              \
      "the client's source was at max_connections_per_source or connection_rate_per_source")       \
    R(arg, HandedOver, handed_over,                                                                \
      "detached whole, open, for another engine to carry on (an upgrade's connection hand-over)")

namespace uringfwd {

#define URINGFWD_CLOSE_ENUMERATOR(arg, enumerator, name, help) enumerator,
enum class CloseReason : uint8_t { URINGFWD_CLOSE_REASONS(URINGFWD_CLOSE_ENUMERATOR, ) };
#undef URINGFWD_CLOSE_ENUMERATOR

#define URINGFWD_CLOSE_ONE(arg, enumerator, name, help) +1
inline constexpr std::size_t kCloseReasonCount = 0 URINGFWD_CLOSE_REASONS(URINGFWD_CLOSE_ONE, );
#undef URINGFWD_CLOSE_ONE

// "clean", "client_reset", ...
std::string_view to_string(CloseReason reason);

// Whether the connection is closed with RST on both sides (SO_LINGER {1, 0}) rather
// than FIN: every reason but a clean end, an idle timeout or max_duration means the stream
// was cut. The last two end it on purpose, so both peers see an orderly end. A connection
// handed over is not closed at all: its sockets went to another engine.
constexpr bool closes_with_reset(CloseReason reason) {
    return reason != CloseReason::Clean && reason != CloseReason::IdleTimeout &&
           reason != CloseReason::MaxDuration && reason != CloseReason::HandedOver;
}

} // namespace uringfwd
