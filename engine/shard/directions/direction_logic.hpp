// The decisions of one forwarding direction (source socket -> pipe -> destination
// socket), as pure functions of splice results, so they can be tested without a kernel.
#pragma once

#include "uringfwd/config.hpp"

#include <cstddef>
#include <cstdint>
#include <limits>

namespace uringfwd::engine {

enum class Next {
    SpliceAgain,  // pipe empty, source likely has more queued: submit another pair now
    WaitReadable, // pipe empty, source drained: give the pipe back, wait for POLLIN
    WaitWritable, // bytes left in the pipe, destination full: wait for POLLOUT, then drain
    SourceEnded,  // FIN from the source and the pipe is empty: shut the destination's write side
    SourceFailed, // reading the source failed (reset, error)
    DestFailed,   // writing the destination failed (reset, broken pipe)
};

const char* to_string(Next next);

// A socket->pipe splice hard-linked to a pipe->socket splice, submitted on an empty
// pipe. `in` and `out` are the two CQE results; `left_in_pipe` is the byte counter after
// both were accounted.
struct PairOutcome {
    int in;
    int out;
    std::size_t left_in_pipe;
    std::size_t capacity;
};

Next after_pair(const PairOutcome& outcome);

// A read at least this large counts as bulk: the next splice follows at once instead
// of a poll. min(64 KiB, half the pipe).
std::size_t bulk_threshold(std::size_t capacity);

// A pipe->socket splice that drained bytes left over from a pair.
Next after_drain(int out, std::size_t left_in_pipe);

// ---- choosing between splice and copy, per direction (DataPath::Auto)

enum class Path : uint8_t { Splice, Copy };

// The path a direction starts on: Auto starts copying, since a connection's first
// bytes are most often a small request.
Path first_path(DataPath mode);

// Full buffers in a row that mark a direction as bulk.
constexpr uint8_t kFullBuffersForBulk = 2;

// After a copy receive of `received` bytes into a buffer of `buffer_size`: updates the
// count of full buffers in a row and says whether the direction should move to
// splice. A full buffer means the socket most likely holds more.
bool copy_turns_bulk(DataPath mode, int received, std::size_t buffer_size, uint8_t& full_in_a_row);

// ---- the copy path's large buffers (a second provided-buffer group, "bulk buffers")

// Under DataPath::Copy, a direction that turned bulk (kFullBuffersForBulk full small
// buffers in a row) receives into the shard's bulk buffers from then on, when it has
// them. Auto does not: on the development host splicing a bulk stream cost 1.5-1.9x
// less CPU per GB than copying it even with 1 MiB buffers (docs/bulk-experiments.md,
// "Large buffers"), so Auto's bulk directions splice (copy_turns_bulk).
bool copy_uses_bulk_buffers(DataPath mode, bool have_bulk_buffers, uint8_t full_in_a_row);

// A receive into bulk buffers that brought less than one small buffer counts as small;
// kSmallReadsForCopy of them in a row send the direction back to the small buffers
// (a chatty phase after a bulk one). Updates the count; true: go back.
bool bulk_turns_small(int received, std::size_t small_buffer_size, uint8_t& small_in_a_row);

// Chunks (buffers received, not all sent) a direction holds at most: 2 small buffers
// (one being sent while the next is received), or up to kMaxBulkHeld bulk buffers
// asked for, and never more than kMaxChunks (the storage, and the most bulk buffers
// a shard may have: a bundle on a kernel that ignores its length cap may take every
// free one, docs/kernel.md §8.2).
constexpr unsigned kMaxSmallHeld = 2;
constexpr unsigned kMaxBulkHeld = 8;
constexpr unsigned kBundleBuffers = 4; // a receive bundle asks for at most this many
constexpr unsigned kMaxChunks = 16;

// Whether a copying direction holding `held` chunks, `held_small` of them small
// buffers, may receive now. A bulk receive waits until no small buffer is held, so
// that the bound above holds whatever the kernel gives.
bool copy_may_receive(bool bulk, unsigned held, unsigned held_small);

// The length cap of a bulk receive (0 = none) for a direction holding `held` bulk
// chunks: as many buffers as may still be held, at most kBundleBuffers, one without
// bundles.
std::size_t bulk_receive_len(bool bundles, unsigned held, std::size_t bulk_buffer_size);

// Small splice reads in a row that mark a direction as chatty again. One is not
// enough: a bulk stream that the proxy outpaces also has small reads now and then
// (measured: one switch to copy and back every ~4 MiB of an iperf3 stream with 1).
constexpr uint8_t kSmallReadsForCopy = 2;

// After a splice pair that read `in` bytes: updates the count of small reads in a row
// and says whether the direction should go back to copying. A bulk read (at least
// bulk_threshold) resets the count; -EAGAIN and EOF (in <= 0) say nothing about the
// traffic's size and leave it.
bool splice_turns_small(DataPath mode, int in, std::size_t capacity, uint8_t& small_in_a_row);

// A parked splice (bulk_park) returns as soon as the first segments arrive, since the
// data itself wakes its worker, so its reads are smaller than a poll-gated one's while
// the stream is just as bulk. Below this it counts as small.
constexpr int kParkedSmallRead = 16 * 1024;

// The read size splice_turns_small() should judge: a parked read of at least
// kParkedSmallRead counts as a full (bulk) one.
inline int parked_size(bool parked, int in) {
    return parked && in >= kParkedSmallRead ? std::numeric_limits<int>::max() : in;
}

} // namespace uringfwd::engine
