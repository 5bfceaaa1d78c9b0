// Every counter the engine keeps, declared once: X(name, kind, help). The public
// EngineStats fields, the shards' own counters, the SIGUSR1 line and any metrics
// exposition are all generated from this list, so a new counter is one line here
// (plus the code that counts it).
#pragma once

#include "uringfwd/close_reason.hpp"

// kind: Counter (only grows) or Gauge (goes up and down).
#define URINGFWD_PLAIN_COUNTERS(X)                                                                 \
    X(accepted, Counter, "client connections accepted")                                            \
    X(active, Gauge, "connections open now")                                                       \
    X(upstream_failures, Counter, "upstream connects refused, unreachable or timed out")           \
    X(bytes_to_upstream, Counter, "bytes forwarded client -> upstream")                            \
    X(bytes_to_client, Counter, "bytes forwarded upstream -> client")                              \
    X(splices, Counter, "splice operations completed")                                             \
    X(short_splices, Counter, "pipe->socket splices that moved less than the pipe held")           \
    X(eagains, Counter, "splices that returned EAGAIN")                                            \
    X(inline_splices, Counter, "splices made by splice(2) on the shard's thread (inline)")         \
    X(inline_yields, Counter, "inline splicing stopped with data left, to let others run")         \
    X(fd_installs, Counter, "plain fds installed for sockets in slots, for inline splices")        \
    X(coalesced, Counter, "bulk wake-ups that moved little: spliced again at the next tick")       \
    X(enters, Counter, "io_uring_enter calls")                                                     \
    X(completions, Counter, "completions (CQEs) reaped")                                           \
    X(pipes_created, Counter, "pipes created")                                                     \
    X(pipes_leased, Gauge, "pipes leased to directions now")                                       \
    X(pipes_closed_dirty, Counter, "pipes closed because they still held bytes")                   \
    X(pipe_size_reductions, Counter, "times the kernel refused the pipe size and it was halved")   \
    X(pipe_waits, Counter, "times a direction had to wait for a pipe")                             \
    X(accept_backoffs, Counter, "accepting paused for lack of file descriptors")                   \
    X(copy_receives, Counter, "copy path: receives that brought bytes")                            \
    X(copy_sends, Counter, "copy path: sends completed")                                           \
    X(buffers_out, Gauge, "copy buffers held now (received, not all sent)")                        \
    X(bulk_receives, Counter, "copy path: receives into the bulk buffers (data path copy)")        \
    X(bundles, Counter, "copy path: receives that filled several bulk buffers at once")            \
    X(buffer_waits, Counter, "receives that found every copy buffer out")                          \
    X(switches_to_splice, Counter, "directions that turned bulk and moved to splice")              \
    X(switches_to_copy, Counter, "directions that turned small and moved back to copying")         \
    X(parks, Counter, "bulk directions whose splices began waiting in the kernel (bulk_park)")     \
    X(parked, Gauge, "directions whose splices wait in the kernel now (bulk_park)")                \
    X(iowq_threads, Gauge, "io-wq kernel workers serving the shard(s) now")                        \
    X(direct_slots, Gauge, "slots of the registered file table held by sockets now")               \
    X(direct_table_full, Counter, "clients reset because the registered file table was full")      \
    X(moved_in, Counter, "connections moved here from another shard (Engine::move_connection)")    \
    X(moved_out, Counter, "connections moved from here to another shard")                          \
    X(moves_given_up, Counter, "moves between shards given up: the connection was never quiet")

// One counter per close reason: closed_clean, closed_client_reset, ...
#define URINGFWD_CLOSE_REASON_COUNTER(X, enumerator, name, help)                                   \
    X(closed_##name, Counter, "connections closed: " help)

#define URINGFWD_COUNTERS(X)                                                                       \
    URINGFWD_PLAIN_COUNTERS(X)                                                                     \
    URINGFWD_CLOSE_REASONS(URINGFWD_CLOSE_REASON_COUNTER, X)
