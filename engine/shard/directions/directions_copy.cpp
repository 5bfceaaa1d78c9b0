// The copy path of a direction: receive into a provided buffer, send it on.
#include "shard/directions/directions.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <span>

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
// ends here: send the oldest chunk(s) if no send is in flight, then receive, finish
// or move to splice.
Outcome Directions::pump_copy(Connection& conn, Side side) {
    Direction& dir = conn.dir(side);
    dir.state = DirState::Copying;
    dir.held = false;
    if (!dir.sending && dir.chunk_count > 0)
        send_chunks(conn, side);
    if (dir.receiving || dir.waiting_buffer)
        return Outcome::running();
    bool all_sent = dir.chunk_count == 0 && !dir.sending;
    // Leaving: nothing more is received until what is held has been sent.
    if (!all_sent && (dir.source_ended || dir.to_splice || conn.leaving ||
                      !copy_may_receive(dir.bulk, dir.chunk_count, small_chunks(dir)))) {
        // Nothing reads the source until the destination takes what we hold, which
        // may be never: watch the source so that its reset is not missed (as the
        // splice path does while it waits for POLLOUT).
        watch_source(conn, side);
        return Outcome::running();
    }
    if (dir.source_ended)
        return end_direction(conn, side);
    if (all_sent && !dir.to_splice && should_hold(conn, side)) {
        hold(conn, side); // leaving: the connection is quiet once the other is
        return Outcome::running();
    }
    if (dir.to_splice) {
        // Every received byte has been sent, so the splice path starts on an empty
        // stream: nothing is reordered by the switch.
        dir.to_splice = false;
        dir.path = Path::Splice;
        bump(shard_.io.counters().switches_to_splice);
        start_reading(conn, side);
        return Outcome::running();
    }
    if (dir.bulk && shard_.bulk_buffers->out() == shard_.bulk_buffers->count()) {
        // Other bulk directions hold every bulk buffer: the receive would only come
        // back with -ENOBUFS. Back to the small ones (it returns after two full ones).
        bump(shard_.io.counters().buffer_waits);
        dir.bulk = false;
        dir.full_in_a_row = 0;
        if (!copy_may_receive(false, dir.chunk_count, small_chunks(dir))) {
            watch_source(conn, side); // a send is in flight: its completion comes back here
            return Outcome::running();
        }
    }
    dir.receiving = true;
    dir.receiving_bulk = dir.bulk;
    if (dir.bulk) {
        uring::ProvidedBuffers& bulk = *shard_.bulk_buffers;
        std::size_t len = bulk_receive_len(shard_.bundles, dir.chunk_count, bulk.buffer_size());
        if (shard_.bundles)
            shard_.io.recv_bundle(conn.in_flight, conn.tag(Op::Recv, side), dir.src, bulk.group(),
                                  len);
        else
            shard_.io.recv_provided(conn.in_flight, conn.tag(Op::Recv, side), dir.src,
                                    bulk.group());
        return Outcome::running();
    }
    shard_.io.recv_provided(conn.in_flight, conn.tag(Op::Recv, side), dir.src,
                            shard_.buffers->group());
    return Outcome::running();
}

unsigned Directions::small_chunks(const Direction& dir) {
    unsigned n = 0;
    for (uint8_t i = 0; i < dir.chunk_count; ++i)
        n += dir.chunks()[i].bulk ? 0 : 1;
    return n;
}

std::byte* Directions::chunk_data(const CopyChunk& chunk) const {
    const uring::ProvidedBuffers& group = chunk.bulk ? *shard_.bulk_buffers : *shard_.buffers;
    return group.data(chunk.buffer);
}

std::span<std::byte> Directions::unsent_part(const Direction& dir, uint8_t i) const {
    const CopyChunk& chunk = dir.chunks()[i];
    const uint32_t skip = i == 0 ? dir.first_sent : 0;
    return {chunk_data(chunk) + skip, chunk.length - skip};
}

void Directions::send_chunks(Connection& conn, Side side) {
    Direction& dir = conn.dir(side);
    const CopyChunk& first = dir.chunks()[0];
    dir.sending = true;
    dir.sending_vector = false;
    if (dir.chunk_count == 1 || !first.bulk || dir.vector_blocked) {
        dir.vector_blocked = false;
        shard_.io.send(conn.in_flight, conn.tag(Op::Send, side), dir.dst,
                       chunk_data(first) + dir.first_sent, first.length - dir.first_sent,
                       kSendFlags);
        return;
    }
    // Several bulk chunks: one sendmsg of them all, the counterpart of the receive
    // bundle that brought them (a send bundle would need them in a send-side buffer
    // ring of its own, docs/kernel.md §8.2).
    BulkStore& v = *dir.bulk_store; // a bulk chunk came into it
    for (uint8_t i = 0; i < dir.chunk_count; ++i) {
        const std::span<std::byte> part = unsent_part(dir, i);
        v.iov[i].iov_base = part.data();
        v.iov[i].iov_len = part.size();
    }
    v.msg = msghdr{};
    v.msg.msg_iov = v.iov;
    v.msg.msg_iovlen = dir.chunk_count;
    dir.sending_vector = true;
    shard_.io.sendmsg(conn.in_flight, conn.tag(Op::Send, side), dir.dst, &v.msg, kSendFlags);
}

Outcome Directions::on_received(Connection& conn, Side side, const uring::Completion& c) {
    Direction& dir = conn.dir(side);
    dir.receiving = false;
    if (dir.receiving_bulk)
        return on_bulk_received(conn, side, c);
    uring::ProvidedBuffers& buffers = *shard_.buffers;
    std::optional<uint16_t> buffer = c.buffer();
    if (buffer) {
        buffers.take(*buffer);
        if (c.result <= 0 || conn.phase == Phase::Closing)
            buffers.give_back(*buffer); // nothing in it that anyone wants
    }
    if (conn.phase == Phase::Closing) {
        if (c.result > 0)
            conn.dir(side).discarded = true;
        return Outcome::running();
    }
    if (c.result > 0) {
        if (!buffer)
            return Outcome::failed(CloseReason::LocalError, "a receive without a buffer from",
                                   source_name(side), 0);
        dir.chunks()[dir.chunk_count++] =
            CopyChunk{*buffer, false, static_cast<uint32_t>(c.result)};
        bump(shard_.io.counters().copy_receives);
        if (copy_turns_bulk(shard_.data_path, c.result, buffers.buffer_size(), dir.full_in_a_row))
            dir.to_splice = true;
        else if (copy_uses_bulk_buffers(shard_.data_path, shard_.bulk_buffers != nullptr,
                                        dir.full_in_a_row)) {
            if (!dir.bulk_store) {
                // Room for the bulk chunks; what it holds moves along (the buffers stay
                // where they are, so a send in flight is not disturbed).
                dir.bulk_store = std::make_unique<BulkStore>();
                for (uint8_t i = 0; i < dir.chunk_count; ++i)
                    dir.bulk_store->chunks[i] = dir.small_chunks[i];
            }
            dir.bulk = true;
            dir.small_in_a_row = 0;
        }
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

// A receive into the bulk buffers: one buffer, or with bundles several consecutive
// ones of the ring, the first named by the completion.
Outcome Directions::on_bulk_received(Connection& conn, Side side, const uring::Completion& c) {
    Direction& dir = conn.dir(side);
    uring::ProvidedBuffers& bulk = *shard_.bulk_buffers;
    std::optional<uint16_t> first = c.buffer();
    uint16_t ids[kMaxChunks];
    std::size_t taken = 0;
    if (first && c.result > 0) {
        taken = bulk.take_bundle(*first, static_cast<std::size_t>(c.result),
                                 std::span<uint16_t>(ids, kMaxChunks - dir.chunk_count));
        if (taken == 0)
            return Outcome::failed(CloseReason::LocalError,
                                   "a receive bundle that does not match the buffer ring from",
                                   source_name(side), 0);
    } else if (first) {
        bulk.take(*first);
        bulk.give_back(*first);
    }
    if (conn.phase == Phase::Closing) {
        for (std::size_t i = 0; i < taken; ++i)
            bulk.give_back(ids[i]);
        if (c.result > 0)
            conn.dir(side).discarded = true;
        return Outcome::running();
    }
    if (c.result > 0) {
        if (!first)
            return Outcome::failed(CloseReason::LocalError, "a receive without a buffer from",
                                   source_name(side), 0);
        std::size_t left = static_cast<std::size_t>(c.result);
        for (std::size_t i = 0; i < taken; ++i) {
            std::size_t length = left < bulk.buffer_size() ? left : bulk.buffer_size();
            dir.chunks()[dir.chunk_count++] =
                CopyChunk{ids[i], true, static_cast<uint32_t>(length)};
            left -= length;
        }
        bump(shard_.io.counters().copy_receives);
        bump(shard_.io.counters().bulk_receives);
        if (taken > 1)
            bump(shard_.io.counters().bundles);
        if (bulk_turns_small(c.result, shard_.buffers->buffer_size(), dir.small_in_a_row)) {
            dir.bulk = false;
            dir.full_in_a_row = 0;
        }
    } else if (c.result == 0) {
        dir.source_ended = true;
    } else if (c.result == -ENOBUFS) {
        // Other bulk directions hold every bulk buffer: back to the small ones, which
        // it leaves again after two full ones. No byte was read.
        bump(shard_.io.counters().buffer_waits);
        dir.bulk = false;
        dir.full_in_a_row = 0;
    } else {
        return source_failed(side, "reading", c.result);
    }
    return pump_copy(conn, side);
}

Outcome Directions::on_sent(Connection& conn, Side side, int result) {
    Direction& dir = conn.dir(side);
    dir.sending = false;
    if (conn.phase == Phase::Closing) {
        // What it sent is delivered, and no chunk it emptied counts as left behind
        // (leaves_bytes_behind); the others go back in release().
        if (result > 0) {
            count_bytes(conn, side, result);
            retire_sent(dir, static_cast<uint32_t>(result));
        }
        return Outcome::running();
    }
    if (result == -EAGAIN && dir.sending_vector) {
        // Unlike a send, a sendmsg heeds the socket's O_NONBLOCK (net/socket.c
        // ____sys_sendmsg sets MSG_DONTWAIT from it), so on a full socket it can end
        // with -EAGAIN. Nothing was sent: send the first chunk alone, which waits for
        // room (below).
        dir.vector_blocked = true;
        return pump_copy(conn, side);
    }
    // A full socket does not come back as -EAGAIN: io_uring then waits for room with
    // its internal poll, since sock_sendmsg() goes by the message flags, not the
    // file's O_NONBLOCK (io_uring/net.c io_send). So any result <= 0 is a failure.
    if (result <= 0)
        return destination_failed(side, result == 0 ? "nothing was sent to" : "writing", result);
    bump(shard_.io.counters().copy_sends);
    count_bytes(conn, side, result);
    retire_sent(dir, static_cast<uint32_t>(result));
    return pump_copy(conn, side);
}

void Directions::retire_sent(Direction& dir, uint32_t sent) {
    // The send covered the first chunks in order, from first_sent on: whatever it
    // took of them is done, and the buffers it emptied go back.
    uint32_t left = sent;
    uint8_t done = 0;
    while (left > 0 && done < dir.chunk_count) {
        const CopyChunk& chunk = dir.chunks()[done];
        uint32_t unsent = chunk.length - dir.first_sent;
        if (left < unsent) {
            dir.first_sent += left;
            break;
        }
        left -= unsent;
        give_back_chunk(chunk);
        dir.first_sent = 0;
        ++done;
    }
    for (uint8_t i = done; i < dir.chunk_count; ++i)
        dir.chunks()[i - done] = dir.chunks()[i];
    dir.chunk_count = static_cast<uint8_t>(dir.chunk_count - done);
}

void Directions::give_back_chunk(const CopyChunk& chunk) {
    (chunk.bulk ? shard_.bulk_buffers : shard_.buffers)->give_back(chunk.buffer);
}

void Directions::give_back_chunks(Direction& dir) {
    for (uint8_t i = 0; i < dir.chunk_count; ++i)
        give_back_chunk(dir.chunks()[i]);
    dir.chunk_count = 0;
    dir.first_sent = 0;
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
