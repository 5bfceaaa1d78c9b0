// One end of a byte-stream conversation, driven by poll() on a single socket: sends a
// deterministic payload and hashes whatever comes back, in a chosen order, at a chosen
// reading pace, optionally aborting with an RST part-way. Clients and peer servers both
// use it, so every scenario (source, sink, duplex, half-close, reset) is one plan.
#pragma once

#include "tests/support/deadline.hpp"
#include "tests/support/socket_io.hpp"
#include "tests/support/unique_fd.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace uringfwd::test {

struct ExchangePlan {
    enum class Order {
        Concurrent,  // send and receive at the same time
        SendFirst,   // send everything (and FIN) before reading anything: "speaks first"
        ReceiveFirst // read to EOF before sending anything
    };

    uint64_t send_bytes = 0;
    uint64_t send_seed = 1;
    Order order = Order::Concurrent;
    // FIN once everything is sent. With ReceiveFirst that is after the peer's FIN.
    bool shutdown_write_after_send = true;

    // Reading: nothing is read until `read_delay` has passed (so the proxy must hold the
    // data back), then at most `read_bytes_per_sec` (0 = unlimited), `read_chunk` at a time.
    milliseconds read_delay{0};
    std::size_t read_chunk = 64 * 1024;
    uint64_t read_bytes_per_sec = 0;

    // Reset the connection (SO_LINGER {1,0} + close) once this much has been sent /
    // received.
    std::optional<uint64_t> abort_after_sent;
    std::optional<uint64_t> abort_after_received;

    // Readable means "give up now" (a server being stopped); -1 = none.
    int cancel_fd = -1;
};

struct ExchangeResult {
    uint64_t sent = 0;
    uint64_t received = 0;
    std::string received_sha256;              // of every byte received
    IoStatus send_status = IoStatus::NotDone; // Ok once all bytes were sent
    IoStatus recv_status = IoStatus::NotDone; // Eof once the peer's FIN arrived
    int send_error = 0;
    int recv_error = 0;
    bool aborted = false;                               // this side reset the connection as planned
    Clock::duration elapsed{};                          // from start until the exchange ended
    Clock::duration first_byte{Clock::duration::max()}; // until the first byte arrived
    Clock::duration send_finished{Clock::duration::max()}; // until the last byte was sent

    // One line for assertion messages.
    std::string describe() const;
};

// Runs `plan` on `fd` until both directions are finished or failed, or the deadline
// passes (unfinished directions then report Timeout). Closes `fd` when it aborts.
ExchangeResult exchange(UniqueFd& fd, const ExchangePlan& plan, const Deadline& deadline);

// Plans for the usual peers.
// Sends `bytes` (speaking first), FINs, then drains what the other side sends.
ExchangePlan source_plan(uint64_t bytes, uint64_t seed);
// Reads to EOF, optionally slowly, and FINs only after that.
ExchangePlan sink_plan(uint64_t read_bytes_per_sec = 0);
// Sends `bytes` (then FIN) while it reads what comes at most `read_bytes_per_sec`: one
// end of a stream held back by its readers both ways.
ExchangePlan paced_duplex_plan(uint64_t bytes, uint64_t seed, uint64_t read_bytes_per_sec);

} // namespace uringfwd::test
