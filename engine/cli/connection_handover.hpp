// An upgrade's connection hand-over, the binary's half (docs/handover.md): after the
// listeners (upgrade.hpp), on the same socket, the old process passes its open
// connections to the successor in batches, as its shards detach them
// (Engine::begin_handover), and keeps every one the successor has not acknowledged.
//
// The conversation, one SOCK_SEQPACKET message each:
//   old -> new  "conns" and a record per connection (route, member, bytes each way,
//               open and connect times, NUL-separated), carrying its client's and its
//               upstream's fds, at most kConnectionsPerBatch of them; or, when the
//               successor takes pipes, "conns+pipes", whose records add the bytes held
//               in a pipe toward the upstream and toward the client (0: no pipe), and
//               whose fds are each connection's two sockets and then the read and write
//               ends of each of its pipes, at most kFdsPerMessage in one message
//   new -> old  "adopted " and one '1' (carried on) or '0' (refused: the old process
//               takes it back, Engine::adopt) per connection of the batch
//   old -> new  "end N": no more (N handed over)
// If the successor goes away before it answers, the old process takes the batch back
// and keeps every connection it still has. Neither side times the other out: a
// successor that is slow to answer may hold the batch already.
#pragma once

#include "cli/process_log.hpp"
#include "ops/unique_fd.hpp"
#include "uringfwd/engine.hpp"

#include <sys/types.h>

#include <atomic>
#include <thread>

namespace uringfwd::cli {

// Two fds a connection (up to six with pipes), within one message's kFdsPerMessage.
inline constexpr std::size_t kConnectionsPerBatch = 100;

// The old process's side: begin_handover() at construction (so before the caller
// stops the engine), then a thread that runs the hand-over to the last connection (or
// the successor's end), then end_handover().
class ConnectionSender {
public:
    // `with_pipes`: the successor takes connections with the bytes they hold in pipes
    // (UnsentBytes::GoAlong), so one whose destination does not read moves too.
    ConnectionSender(ops::UniqueFd conversation, Engine& engine, const ProcessLog& log,
                     pid_t successor, bool with_pipes);
    ~ConnectionSender(); // joins
    ConnectionSender(const ConnectionSender&) = delete;
    ConnectionSender& operator=(const ConnectionSender&) = delete;
    bool done() const { return done_.load(std::memory_order_acquire); }

private:
    void run();
    ops::UniqueFd conversation_;
    Engine& engine_;
    const ProcessLog& log_;
    pid_t successor_;
    bool with_pipes_;
    std::atomic<bool> done_{false};
    std::thread thread_;
};

// The successor's side: a thread that adopts what comes until "end" (or the old
// process's end).
class ConnectionReceiver {
public:
    ConnectionReceiver(ops::UniqueFd conversation, Engine& engine, const ProcessLog& log,
                       pid_t old_process);
    ~ConnectionReceiver(); // stops listening and joins
    ConnectionReceiver(const ConnectionReceiver&) = delete;
    ConnectionReceiver& operator=(const ConnectionReceiver&) = delete;

private:
    void run();
    ops::UniqueFd conversation_;
    Engine& engine_;
    const ProcessLog& log_;
    pid_t old_process_;
    std::thread thread_;
};

} // namespace uringfwd::cli
