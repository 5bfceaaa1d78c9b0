// A connection leaving its shard (an upgrade's hand-over, a move between shards;
// docs/handover.md): when a direction is quiet, and when one that has delivered all it
// held waits for the pause instead of reading again (Direction::held); and one arriving
// with bytes its old shard could not deliver yet, in the pipe that came along.
#include "shard/directions/directions.hpp"

#include <array>
#include <optional>

#include <unistd.h>

namespace uringfwd::engine {

namespace {

std::size_t unsent_bytes(const Direction& dir) {
    std::size_t n = 0;
    for (uint8_t i = 0; i < dir.chunk_count; ++i)
        n += dir.chunks()[i].length;
    return n - dir.first_sent;
}

} // namespace

bool Directions::quiet(const Connection& conn, Side side, std::size_t pipe_room) {
    const Direction& dir = conn.dir(side);
    if (dir.parked || conn.cancelling[static_cast<int>(side)])
        return false;
    if (dir.pipe)
        // Waiting for its destination with bytes in its pipe, nothing in flight but
        // that POLLOUT poll: the pipe can go along with them (its byte count is exact
        // between splices), so a destination that never reads does not keep it here.
        return pipe_room > 0 && dir.state == DirState::PollingOut && !dir.pipe->empty();
    switch (dir.state) {
    case DirState::Done:
    case DirState::PollingIn:
        return true;
    case DirState::Copying:
        // Its receive in flight, or held: nothing held, nothing sent, no switch pending.
        if ((dir.receiving || dir.held) && !dir.sending && dir.chunk_count == 0 &&
            !dir.waiting_buffer && !dir.to_splice && !dir.source_ended)
            return true;
        // Or sending what it holds, reading nothing (a leaving direction takes no more
        // meanwhile), and a pipe takes it all: the send is cancelled and the rest goes
        // along in a pipe. Not once its source ended: that FIN was read here, and
        // would not be read again from the socket.
        return pipe_room > 0 && dir.sending && !dir.receiving && dir.chunk_count > 0 &&
               !dir.waiting_buffer && !dir.source_ended && unsent_bytes(dir) <= pipe_room;
    case DirState::Idle:
    case DirState::WaitingPipe:
    case DirState::WaitingFd:
    case DirState::Coalescing:
    case DirState::Splicing:
    case DirState::PollingOut:
    case DirState::Draining:
        return false;
    }
    return false;
}

Outcome Directions::release_hold(Connection& conn, Side side) {
    Direction& dir = conn.dir(side);
    if (!dir.held)
        return Outcome::running();
    if (dir.state == DirState::Copying)
        return pump_copy(conn, side); // its error watch stays: harmless while receiving
    unwatch_source(conn, side);       // the POLLIN poll reports errors too
    start_reading(conn, side);
    return Outcome::running();
}

bool Directions::should_hold(const Connection& conn, Side side) const {
    if (!conn.leaving || shard_.now < conn.hold_again_at)
        return false;
    const Side o = other(side);
    if (quiet(conn, o))
        return true;
    const Direction& dir = conn.dir(o);
    switch (dir.state) {
    case DirState::PollingOut: // waiting for its destination with bytes in its pipe
    case DirState::Draining:   // sending what its pipe holds
    case DirState::Splicing:   // its last pair in flight
    case DirState::Coalescing: // one round at its tick, then it is quiet
        return !dir.parked;
    case DirState::Copying:
        return !dir.receiving && (dir.sending || dir.chunk_count != 0); // sending what it holds
    case DirState::Idle:
    case DirState::WaitingPipe:
    case DirState::WaitingFd:
    case DirState::PollingIn:
    case DirState::Done:
        return false;
    }
    return false;
}

void Directions::hold(Connection& conn, Side side) {
    Direction& dir = conn.dir(side);
    if (dir.state != DirState::Copying)
        dir.state = DirState::PollingIn; // with no poll: nothing is read
    dir.held = true;
    if (conn.holding_since == std::chrono::steady_clock::time_point{})
        conn.holding_since = shard_.now;
    watch_source(conn, side); // nothing reads it: a reset must still be seen
}

void Directions::on_send_cancelled(Connection& conn, Side side, int result) {
    Direction& dir = conn.dir(side);
    dir.sending = false;
    if (result <= 0)
        return; // nothing sent: the chunks are as they were
    bump(shard_.io.counters().copy_sends);
    count_bytes(conn, side, result);
    retire_sent(dir, static_cast<uint32_t>(result));
}

bool Directions::write_chunks(const Direction& dir, pipes::Pipe& pipe) const {
    if (pipe.capacity() < unsent_bytes(dir))
        return false; // one made small over the per-user budget (docs/kernel.md)
    for (uint8_t i = 0; i < dir.chunk_count; ++i) {
        const std::span<std::byte> part = unsent_part(dir, i);
        const ssize_t written = ::write(pipe.write_fd(), part.data(), part.size());
        if (written > 0)
            pipe.filled(static_cast<std::size_t>(written));
        if (written != static_cast<ssize_t>(part.size()))
            return false;
    }
    return true;
}

bool Directions::hold_chunks_in_pipes(Connection& conn) {
    // Both directions or neither: one turned into a splice direction while the other
    // stays copying would be resumed half-converted when the pause is called off.
    std::array<std::optional<pipes::Pipe>, 2> pipes;
    bool all_held = true;
    for (Side side : kBothSides) {
        const Direction& dir = conn.dir(side);
        if (dir.state != DirState::Copying || dir.chunk_count == 0)
            continue; // nothing held: nothing to do
        std::optional<pipes::Pipe>& pipe = pipes[static_cast<int>(side)];
        pipe = shard_.pool.lease();
        if (!pipe || !write_chunks(dir, *pipe)) {
            all_held = false;
            break;
        }
    }
    if (!all_held) {
        // A pipe given back holding bytes is closed by the pool, never reused; the
        // chunks are untouched, so the directions are as they were.
        for (std::optional<pipes::Pipe>& pipe : pipes)
            if (pipe)
                shard_.pool.give_back(std::move(*pipe));
        return false;
    }
    for (Side side : kBothSides) {
        std::optional<pipes::Pipe>& pipe = pipes[static_cast<int>(side)];
        if (!pipe)
            continue;
        Direction& dir = conn.dir(side);
        give_back_chunks(dir);
        dir.pipe = std::move(pipe);
        dir.path = Path::Splice;
        dir.state = DirState::PollingOut; // its wait for room was the send just cancelled
        dir.inline_splice = false;
        dir.unsent_first = true;
        dir.to_splice = false; // it goes back to its shard's path once the pipe is empty
    }
    return true;
}

Outcome Directions::start_with_unsent(Connection& conn, Side side) {
    Direction& dir = conn.dir(side);
    dir.path = Path::Splice;
    // Through the ring: a socket just put into a slot has no fd for splice(2) yet.
    dir.inline_splice = false;
    dir.unsent_first = true;
    // Its source is read only once the pipe is empty, so the bytes keep their order.
    return follow(conn, side, Next::WaitWritable, /*read_result=*/0, /*write_result=*/0);
}

Outcome Directions::unsent_delivered(Connection& conn, Side side) {
    Direction& dir = conn.dir(side);
    dir.unsent_first = false;
    dir.inline_splice = shard_.inline_splice;
    const Path path = shard_.buffers != nullptr ? first_path(shard_.data_path) : Path::Splice;
    if (path == Path::Splice)
        return follow(conn, side, Next::WaitReadable, /*read_result=*/0, /*write_result=*/0);
    release_pipe(dir, false);
    dir.path = Path::Copy; // its error watch stays: harmless while receiving
    dir.full_in_a_row = 0;
    dir.small_in_a_row = 0;
    return pump_copy(conn, side);
}

} // namespace uringfwd::engine
