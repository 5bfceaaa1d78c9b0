// The copy path of a direction: receive into a provided buffer, send it on.
#include "shard/directions.hpp"

#include <sys/socket.h>

#include <cerrno>

namespace uringfwd::engine {

namespace {

// A send to a peer that has gone must fail with EPIPE, not raise SIGPIPE in an
// application that embeds the engine and never thought of it.
constexpr int kSendFlags = MSG_NOSIGNAL;

} // namespace

// Receive into a provided buffer, send it on. Both run inline on the shard's thread
// (io_uring polls internally when the socket is not ready, docs/kernel.md §8), so a
// small message costs no io-wq hop, which is what the splice path pays on every
// splice (§1.1, §1.7).

// Everything a copying direction does next follows from its state, so every event
// ends here: send the oldest chunk if no send is in flight, then receive, finish or
// move to splice.
Outcome Directions::pump_copy(Connection& conn, Side side) {
    Direction& dir = conn.dir(side);
    dir.state = DirState::Copying;
    if (!dir.sending && dir.chunk_count > 0)
        send_first_chunk(conn, side);
    if (dir.receiving || dir.waiting_buffer)
        return Outcome::running();
    bool all_sent = dir.chunk_count == 0 && !dir.sending;
    if (!all_sent &&
        (dir.source_ended || dir.to_splice || dir.chunk_count == Direction::kMaxChunks)) {
        // Nothing reads the source until the destination takes what we hold, which
        // may be never: watch the source so that its reset is not missed (as the
        // splice path does while it waits for POLLOUT).
        watch_source(conn, side);
        return Outcome::running();
    }
    if (dir.source_ended)
        return end_direction(conn, side);
    if (dir.to_splice) {
        // Every received byte has been sent, so the splice path starts on an empty
        // stream: nothing is reordered by the switch.
        dir.to_splice = false;
        dir.path = Path::Splice;
        bump(shard_.io.counters().switches_to_splice);
        start_reading(conn, side);
        return Outcome::running();
    }
    shard_.io.recv_provided(conn.in_flight, conn.tag(Op::Recv, side), dir.src,
                            shard_.buffers->group());
    dir.receiving = true;
    return Outcome::running();
}

void Directions::send_first_chunk(Connection& conn, Side side) {
    Direction& dir = conn.dir(side);
    const CopyChunk& chunk = dir.chunks[0];
    shard_.io.send(conn.in_flight, conn.tag(Op::Send, side), dir.dst,
                   shard_.buffers->data(chunk.buffer) + chunk.sent, chunk.length - chunk.sent,
                   kSendFlags);
    dir.sending = true;
}

Outcome Directions::on_received(Connection& conn, Side side, const uring::Completion& c) {
    Direction& dir = conn.dir(side);
    uring::ProvidedBuffers& buffers = *shard_.buffers;
    dir.receiving = false;
    std::optional<uint16_t> buffer = c.buffer();
    if (buffer) {
        buffers.take(*buffer);
        if (c.result <= 0 || conn.phase == Phase::Closing)
            buffers.give_back(*buffer); // nothing in it that anyone wants
    }
    if (conn.phase == Phase::Closing)
        return Outcome::running();
    if (c.result > 0) {
        if (!buffer)
            return Outcome::failed(CloseReason::LocalError, "a receive without a buffer from",
                                   source_name(side), 0);
        dir.chunks[dir.chunk_count++] = CopyChunk{*buffer, static_cast<uint32_t>(c.result), 0};
        bump(shard_.io.counters().copy_receives);
        if (copy_turns_bulk(shard_.data_path, c.result, buffers.buffer_size(), dir.full_in_a_row))
            dir.to_splice = true;
    } else if (c.result == 0) {
        dir.source_ended = true;
    } else if (c.result == -ENOBUFS) {
        // Every buffer is out; the data is still in the socket.
        bump(shard_.io.counters().buffer_waits);
        if (shard_.data_path == DataPath::Auto) {
            dir.to_splice = true; // a pipe will do
        } else {
            dir.waiting_buffer = true;
            buffer_waiters_.push_back({conn.slot, conn.generation, side});
            watch_source(conn, side);
        }
    } else {
        return source_failed(side, "reading", c.result);
    }
    return pump_copy(conn, side);
}

Outcome Directions::on_sent(Connection& conn, Side side, int result) {
    Direction& dir = conn.dir(side);
    dir.sending = false;
    if (conn.phase == Phase::Closing)
        return Outcome::running(); // the chunks go back in release()
    // A full socket does not come back as -EAGAIN: io_uring then waits for room with
    // its internal poll, since sock_sendmsg() goes by the message flags, not the
    // file's O_NONBLOCK (io_uring/net.c io_send). So any result <= 0 is a failure.
    if (result <= 0)
        return destination_failed(side, result == 0 ? "nothing was sent to" : "writing", result);
    bump(shard_.io.counters().copy_sends);
    count_bytes(conn, side, result);
    CopyChunk& first = dir.chunks[0];
    first.sent += static_cast<uint32_t>(result);
    if (first.sent == first.length) {
        shard_.buffers->give_back(first.buffer);
        for (uint8_t i = 1; i < dir.chunk_count; ++i)
            dir.chunks[i - 1] = dir.chunks[i];
        --dir.chunk_count;
    }
    return pump_copy(conn, side);
}

void Directions::give_back_chunks(Direction& dir) {
    for (uint8_t i = 0; i < dir.chunk_count; ++i)
        shard_.buffers->give_back(dir.chunks[i].buffer);
    dir.chunk_count = 0;
}

void Directions::resume_buffer_waiters(ConnectionTable& table, const OutcomeHandler& handle) {
    if (shard_.buffers == nullptr)
        return;
    // Wake no more waiters than there are buffers in the ring: the others would only
    // find it empty again.
    unsigned free_buffers = shard_.buffers->count() - shard_.buffers->out();
    while (!buffer_waiters_.empty() && free_buffers > 0) {
        Waiting w = buffer_waiters_.front();
        buffer_waiters_.pop_front();
        Connection* conn = table.find(w.slot, w.generation);
        if (conn == nullptr || conn->phase != Phase::Forwarding ||
            !conn->dir(w.side).waiting_buffer)
            continue;
        conn->dir(w.side).waiting_buffer = false;
        --free_buffers;
        Outcome outcome = pump_copy(*conn, w.side);
        if (outcome.kind != Outcome::Kind::Running)
            handle(*conn, w.side, outcome);
    }
}

} // namespace uringfwd::engine
