// The copy path of a shard: receive into a provided buffer, send it on. Both run
// inline on the shard's thread (io_uring polls internally when the socket is not
// ready, kernel-notes.md §8), so a small message costs no io-wq hop, which is what
// the splice path pays on every splice (§1.1, §1.7).
#include "shard.hpp"
#include "shard_counter.hpp"

#include <sys/socket.h>

#include <cerrno>

namespace uringfwd::engine {

namespace {
// A send to a peer that has gone must fail with EPIPE, not raise SIGPIPE in an
// application that embeds the engine and never thought of it.
constexpr int kSendFlags = MSG_NOSIGNAL;
} // namespace

void Shard::start_direction(uint32_t slot, Connection& conn, int d) {
    Direction& dir = conn.dirs[d];
    dir.path = buffers_ ? first_path(data_path_) : Path::Splice;
    if (dir.path == Path::Copy)
        pump_copy(slot, conn, d);
    else
        start_reading(slot, conn, d);
}

// Everything a copying direction does next follows from its state, so every event
// ends here: send the oldest chunk if no send is in flight, then receive, finish or
// move to splice.
void Shard::pump_copy(uint32_t slot, Connection& conn, int d) {
    Direction& dir = conn.dirs[d];
    dir.state = DirState::Copying;
    if (!dir.sending && dir.chunk_count > 0)
        send_first_chunk(slot, conn, d);
    if (dir.receiving || dir.waiting_buffer)
        return;
    bool all_sent = dir.chunk_count == 0 && !dir.sending;
    if (!all_sent &&
        (dir.source_ended || dir.to_splice || dir.chunk_count == Direction::kMaxChunks)) {
        // Nothing reads the source until the destination takes what we hold, which
        // may be never: watch the source so that its reset is not missed (as the
        // splice path does while it waits for POLLOUT).
        watch_source(slot, conn, d);
        return;
    }
    if (dir.source_ended) {
        end_direction(slot, conn, d);
    } else if (dir.to_splice) {
        // Every received byte has been sent, so the splice path starts on an empty
        // stream: nothing is reordered by the switch.
        dir.to_splice = false;
        dir.path = Path::Splice;
        bump(counters_.switches_to_splice);
        start_reading(slot, conn, d);
    } else {
        ring_->recv_provided(dir.src, buffers_->group(), tag(Op::Recv, slot, conn, d));
        ++conn.ops_in_flight;
        dir.receiving = true;
    }
}

void Shard::send_first_chunk(uint32_t slot, Connection& conn, int d) {
    Direction& dir = conn.dirs[d];
    const CopyChunk& chunk = dir.chunks[0];
    ring_->send(dir.dst, buffers_->data(chunk.buffer) + chunk.sent, chunk.length - chunk.sent,
                kSendFlags, tag(Op::Send, slot, conn, d));
    ++conn.ops_in_flight;
    dir.sending = true;
}

void Shard::on_received(uint32_t slot, Connection& conn, int d, const uring::Completion& c) {
    Direction& dir = conn.dirs[d];
    dir.receiving = false;
    std::optional<uint16_t> buffer = c.buffer();
    if (buffer) {
        buffers_->take(*buffer);
        if (c.result <= 0 || conn.phase == Phase::Closing)
            buffers_->give_back(*buffer); // nothing in it that anyone wants
    }
    if (conn.phase == Phase::Closing)
        return;
    if (c.result > 0) {
        if (!buffer) {
            abort(slot, conn, "a receive completed without a buffer");
            return;
        }
        dir.chunks[dir.chunk_count++] = CopyChunk{*buffer, static_cast<uint32_t>(c.result), 0};
        bump(counters_.copy_receives);
        if (copy_turns_bulk(data_path_, c.result, buffers_->buffer_size(), dir.full_in_a_row))
            dir.to_splice = true;
    } else if (c.result == 0) {
        dir.source_ended = true;
    } else if (c.result == -ENOBUFS) {
        // Every buffer is out; the data is still in the socket.
        bump(counters_.buffer_waits);
        if (data_path_ == DataPath::Auto) {
            dir.to_splice = true; // a pipe will do
        } else {
            dir.waiting_buffer = true;
            buffer_waiters_.push_back({slot, conn.generation, d});
            watch_source(slot, conn, d);
        }
    } else {
        abort(slot, conn, fmt::format("reading {}: {}", source_name(d), errno_text(c.result)));
        return;
    }
    pump_copy(slot, conn, d);
}

void Shard::on_sent(uint32_t slot, Connection& conn, int d, int result) {
    Direction& dir = conn.dirs[d];
    dir.sending = false;
    if (conn.phase == Phase::Closing)
        return; // the chunks go back in finalize()
    // A full socket does not come back as -EAGAIN: io_uring then waits for room with
    // its internal poll, since sock_sendmsg() goes by the message flags, not the
    // file's O_NONBLOCK (io_uring/net.c io_send). So any result <= 0 is a failure.
    if (result <= 0) {
        abort(slot, conn,
              fmt::format("writing {}: {}", destination_name(d),
                          result == 0 ? std::string("nothing was sent") : errno_text(result)));
        return;
    }
    bump(counters_.copy_sends);
    count_bytes(d, result);
    CopyChunk& first = dir.chunks[0];
    first.sent += static_cast<uint32_t>(result);
    if (first.sent == first.length) {
        buffers_->give_back(first.buffer);
        for (uint8_t i = 1; i < dir.chunk_count; ++i)
            dir.chunks[i - 1] = dir.chunks[i];
        --dir.chunk_count;
    }
    pump_copy(slot, conn, d);
}

void Shard::give_back_chunks(Direction& dir) {
    for (uint8_t i = 0; i < dir.chunk_count; ++i)
        buffers_->give_back(dir.chunks[i].buffer);
    dir.chunk_count = 0;
}

void Shard::resume_buffer_waiters() {
    if (!buffers_)
        return;
    // Wake no more waiters than there are buffers in the ring: the others would only
    // find it empty again.
    unsigned free_buffers = buffers_->count() - buffers_->out();
    while (!buffer_waiters_.empty() && free_buffers > 0) {
        WaitingDirection w = buffer_waiters_.front();
        buffer_waiters_.pop_front();
        Connection* conn = table_.find(w.slot, w.generation);
        if (conn == nullptr || conn->phase != Phase::Forwarding ||
            !conn->dirs[w.direction].waiting_buffer)
            continue;
        conn->dirs[w.direction].waiting_buffer = false;
        --free_buffers;
        pump_copy(w.slot, *conn, w.direction);
    }
}

} // namespace uringfwd::engine
