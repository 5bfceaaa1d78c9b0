#include "shard/directions/direction_logic.hpp"

#include <cerrno>

namespace uringfwd::engine {

const char* to_string(Next next) {
    switch (next) {
    case Next::SpliceAgain:
        return "splice-again";
    case Next::WaitReadable:
        return "wait-readable";
    case Next::WaitWritable:
        return "wait-writable";
    case Next::SourceEnded:
        return "source-ended";
    case Next::SourceFailed:
        return "source-failed";
    case Next::DestFailed:
        return "dest-failed";
    }
    return "?";
}

namespace {
// -EAGAIN is the normal "nothing to do right now" of a non-blocking splice. On the
// source side it means the socket is empty (the pipe cannot be full: pairs start on an
// empty pipe, docs/kernel.md §2.4); on the destination side it means the socket
// buffer is full or the pipe was empty.
bool failed(int result) {
    return result < 0 && result != -EAGAIN;
}
} // namespace

std::size_t bulk_threshold(std::size_t capacity) {
    constexpr std::size_t kBulk = 64 * 1024;
    return capacity / 2 < kBulk ? capacity / 2 : kBulk;
}

Next after_pair(const PairOutcome& o) {
    // A destination error matters even if the source also ended: the bytes read can no
    // longer be delivered, so the stream is broken.
    if (failed(o.out))
        return Next::DestFailed;
    if (failed(o.in))
        return Next::SourceFailed;
    if (o.left_in_pipe > 0)
        return Next::WaitWritable; // pipe->socket stops early only when the socket is full
    if (o.in == 0)
        return Next::SourceEnded;
    if (o.in < 0)
        return Next::WaitReadable; // -EAGAIN: spurious wake-up or someone else drained it
    // Everything read was delivered. A large read suggests a stream in full flow: splice
    // again at once, since data most likely arrived meanwhile. A small one (a request,
    // a reply) probably emptied the socket, and another splice would most likely cost
    // an io-wq round trip just to return -EAGAIN; a one-shot POLLIN checks readiness
    // inline instead (docs/kernel.md §1.7, §2.3) and completes at once if more came.
    if (static_cast<std::size_t>(o.in) >= bulk_threshold(o.capacity))
        return Next::SpliceAgain;
    return Next::WaitReadable;
}

Next after_drain(int out, std::size_t left_in_pipe) {
    if (failed(out))
        return Next::DestFailed;
    if (left_in_pipe > 0)
        return Next::WaitWritable;
    return Next::WaitReadable;
}

Path first_path(DataPath mode) {
    return mode == DataPath::Splice ? Path::Splice : Path::Copy;
}

bool copy_turns_bulk(DataPath mode, int received, std::size_t buffer_size, uint8_t& full_in_a_row) {
    if (received > 0 && static_cast<std::size_t>(received) >= buffer_size) {
        if (full_in_a_row < kFullBuffersForBulk)
            ++full_in_a_row;
    } else {
        full_in_a_row = 0;
    }
    return mode == DataPath::Auto && full_in_a_row >= kFullBuffersForBulk;
}

bool copy_uses_bulk_buffers(DataPath mode, bool have_bulk_buffers, uint8_t full_in_a_row) {
    return mode == DataPath::Copy && have_bulk_buffers && full_in_a_row >= kFullBuffersForBulk;
}

bool bulk_turns_small(int received, std::size_t small_buffer_size, uint8_t& small_in_a_row) {
    if (received <= 0)
        return false; // EOF or an error says nothing about the traffic's size
    if (static_cast<std::size_t>(received) >= small_buffer_size) {
        small_in_a_row = 0;
        return false;
    }
    if (small_in_a_row < kSmallReadsForCopy)
        ++small_in_a_row;
    return small_in_a_row >= kSmallReadsForCopy;
}

bool copy_may_receive(bool bulk, unsigned held, unsigned held_small) {
    if (!bulk)
        return held < kMaxSmallHeld;
    return held_small == 0 && held < kMaxBulkHeld;
}

std::size_t bulk_receive_len(bool bundles, unsigned held, std::size_t bulk_buffer_size) {
    unsigned room = held < kMaxBulkHeld ? kMaxBulkHeld - held : 0;
    unsigned buffers = bundles ? (room < kBundleBuffers ? room : kBundleBuffers) : 1;
    if (buffers == 0)
        buffers = 1;
    return buffers * bulk_buffer_size;
}

bool splice_turns_small(DataPath mode, int in, std::size_t capacity, uint8_t& small_in_a_row) {
    if (in <= 0)
        return false;
    if (static_cast<std::size_t>(in) >= bulk_threshold(capacity)) {
        small_in_a_row = 0;
        return false;
    }
    if (small_in_a_row < kSmallReadsForCopy)
        ++small_in_a_row;
    return mode == DataPath::Auto && small_in_a_row >= kSmallReadsForCopy;
}

} // namespace uringfwd::engine
