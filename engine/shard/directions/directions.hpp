// The two directions of every connection of a shard: each moves bytes from its source
// socket to its destination, by splice (socket -> pipe -> socket) or by copy (receive
// into a provided buffer, send), and under DataPath::Auto switches between the two.
// A direction never closes its connection: every event returns an Outcome, and the
// connection (connections.cpp) decides what follows.
#pragma once

#include "shard/connection/connection.hpp"
#include "shard/loop/shard_context.hpp"

#include <deque>
#include <functional>
#include <span>

namespace uringfwd::engine {

struct Outcome {
    enum class Kind : uint8_t {
        Running,  // nothing for the connection to do
        Finished, // the source ended and everything was delivered; FIN passed on
        Failed,   // the stream is cut: the connection must close with `reason`
    };
    Kind kind = Kind::Running;
    CloseReason reason = CloseReason::Clean;
    const char* action = ""; // "reading", "writing", ... for the debug log
    const char* peer = "";   // "client" or "upstream"
    int error = 0;           // a negated errno, 0 when there is none

    static Outcome running() { return {}; }
    static Outcome finished() { return {Kind::Finished}; }
    static Outcome failed(CloseReason reason, const char* action, const char* peer, int error) {
        return {Kind::Failed, reason, action, peer, error};
    }
};

// Which peer a failure cut the stream at, as a close reason: a failure at the
// source of the ToUpstream direction is the client's, and so on.
inline CloseReason reset_of(Side side, bool at_source) {
    bool client = (side == Side::ToUpstream) == at_source;
    return client ? CloseReason::ClientReset : CloseReason::UpstreamReset;
}
inline Outcome source_failed(Side side, const char* action, int error) {
    return Outcome::failed(reset_of(side, true), action, source_name(side), error);
}
inline Outcome destination_failed(Side side, const char* action, int error) {
    return Outcome::failed(reset_of(side, false), action, destination_name(side), error);
}

class Directions {
public:
    explicit Directions(ShardContext& shard) : shard_(shard) {}

    // The upstream is connected: start moving bytes in this direction.
    Outcome start(Connection& conn, Side side);
    // A completion of one of the direction's operations (PollIn ... ErrorWatch).
    Outcome on_completion(Connection& conn, Side side, Op op, const uring::Completion& c);
    // A plain fd was installed (result >= 0) or could not be (a negated errno) for the
    // source socket of `side` (Op::InstallFd): the directions waiting for it splice,
    // inline or, without it, through the ring. Each direction's outcome goes to `handle`.
    void on_fd_installed(Connection& conn, Side side, int result,
                         const std::function<void(Side, const Outcome&)>& handle);

    // Watches the direction's source for a reset while nothing reads from it (see the
    // definition); unwatch cancels that.
    void watch_source(Connection& conn, Side side);
    void unwatch_source(Connection& conn, Side side);

    // Whether the direction holds nothing and has nothing in flight but the read of its
    // source (a poll, a receive) or nothing at all (done, held): what a hand-over or a
    // move between shards waits for (docs/handover.md). Everything it has not
    // forwarded is then in its source socket. `pipe_room` > 0: a pipe of that size may
    // go along with the connection, so it is quiet also when what it holds is bytes its
    // destination has not taken, and it waits for room there: in its pipe, or in copy
    // chunks (their send in flight) that a pipe of that size takes
    // (hold_chunks_in_pipes).
    static bool quiet(const Connection& conn, Side side, std::size_t pipe_room = 0);
    // Each copying direction paused with chunks not sent (its send cancelled): their
    // bytes go into a pipe, and the direction waits for room at its destination as a
    // splice direction with bytes in its pipe does (PollingOut), delivering them through
    // the ring before it goes back to its path (unsent_first). All or nothing: false
    // when a pipe could not be had for one or its bytes do not fit; then both
    // directions are as they were and no pipe is kept.
    bool hold_chunks_in_pipes(Connection& conn);
    // A cancelled send (a pause) came back: `result` bytes were sent (-ECANCELED,
    // -EAGAIN: none), counted and retired as a send's are.
    void on_send_cancelled(Connection& conn, Side side, int result);
    // A direction held for its connection's pause (Direction::held) reads again: the
    // move was given up, the hand-over ended, or the hold lasted too long.
    Outcome release_hold(Connection& conn, Side side);

    // Whether a closing connection leaves bytes undelivered: a preamble, pipe or copy
    // chunk not yet sent, or input that came in while it closed. A close that would otherwise
    // send FIN resets both sides then, so no peer takes a cut stream for a whole one.
    static bool leaves_bytes_behind(const Connection& conn);

    // Gives back the pipes and copy buffers of a connection that has closed. `verify`:
    // the stream was cut, so ask the kernel whether a pipe is really empty.
    void release(Connection& conn, bool verify);

    // After every batch of completions: hands pipes and buffers that came back to
    // directions waiting for them. A copy direction resumed may end or fail at once;
    // `handle` gets that outcome.
    using OutcomeHandler = std::function<void(Connection&, Side, const Outcome&)>;
    void resume_waiters(ConnectionTable& table, const OutcomeHandler& handle);
    void on_retry_timer() { retry_armed_ = false; }
    void on_coalesce_tick() {
        tick_armed_ = false;
        tick_due_ = true;
    }
    // The shard stops: no more retry timers; cancels the one armed.
    void stop();

    // A direction whose read (PollingIn's poll, Copying's receive) or wait for its
    // destination (PollingOut's poll) a hand-over's pause cancelled, and whose pause was
    // called off: it reads (or waits) again.
    Outcome resume_reading(Connection& conn, Side side);

    // The connection is closing: interrupts the splices that may be waiting in the
    // kernel because a socket of it is parked (bulk_park), which neither a cancel by
    // fd (it matches a splice by its output, a pipe) nor a timeout would end promptly.
    void cancel_parked(Connection& conn);
    InFlight& in_flight() { return in_flight_; }

private:
    // Splice path
    void start_reading(Connection& conn, Side side);
    Outcome on_readable(Connection& conn, Side side, int result);
    // Starts moving what the source has, by the direction's mechanism: a ring pair, or
    // inline splices at once (which may end the direction).
    Outcome start_pair(Connection& conn, Side side);
    void submit_pair(Connection& conn, Side side);
    Outcome on_pair_half(Connection& conn, Side side, Op op, int result);
    Outcome on_writable(Connection& conn, Side side, int result);
    Outcome on_drained(Connection& conn, Side side, int result);
    // Carries out `next`; the splice results name the error when it is a failure.
    Outcome follow(Connection& conn, Side side, Next next, int read_result, int write_result);
    Outcome end_direction(Connection& conn, Side side);
    // shutdown(SHUT_WR) of the destination, by whatever fd it has.
    void pass_fin_on(Connection& conn, Side side);
    Outcome on_error_watch(Connection& conn, Side side, int result, bool more);
    void release_pipe(Direction& dir, bool verify);
    // bulk_park (directions_park.cpp): makes the source blocking with a bounded wait,
    // if enabled and under the limit; unpark makes it non-blocking again.
    void park(Connection& conn, Side side);
    void unpark(Connection& conn, Side side);
    unsigned park_limit() const;
    void resume_pipe_waiters(ConnectionTable& table, const OutcomeHandler& handle);

    // Inline splices (directions_inline.cpp, docs/kernel.md §1.9).
    // Whether both sockets of the direction have an fd for splice(2); asks the ring to
    // install one for a slot that has none yet.
    bool inline_fds_ready(Connection& conn, Side side);
    // Source -> pipe -> destination with splice(2) until the source is empty, the
    // destination full or the round budget spent; the pipe is leased and empty.
    Outcome pump_inline(Connection& conn, Side side);
    // The destination became writable: what the pipe holds, inline.
    Outcome drain_inline(Connection& conn, Side side);
    // A bulk direction whose wake-up moved `moved` bytes and emptied its source: whether
    // it waits for the shard's next coalescing tick instead of the next byte.
    bool should_coalesce(const Direction& dir, uint64_t moved) const;
    void coalesce(Connection& conn, Side side);
    void resume_coalesced(ConnectionTable& table, const OutcomeHandler& handle);

    // Copy path
    Outcome pump_copy(Connection& conn, Side side);
    void send_chunks(Connection& conn, Side side);
    Outcome on_received(Connection& conn, Side side, const uring::Completion& c);
    Outcome on_bulk_received(Connection& conn, Side side, const uring::Completion& c);
    Outcome on_sent(Connection& conn, Side side, int result);
    static unsigned small_chunks(const Direction& dir);
    std::byte* chunk_data(const CopyChunk& chunk) const;
    // Chunk `i`'s bytes not sent yet: all of it, but for the first chunk's `first_sent`.
    std::span<std::byte> unsent_part(const Direction& dir, uint8_t i) const;
    // Writes a paused direction's unsent chunks into `pipe`; false when they do not all
    // fit (what was written stays in the pipe: it is not reused).
    bool write_chunks(const Direction& dir, pipes::Pipe& pipe) const;
    void give_back_chunk(const CopyChunk& chunk);
    // A send of `sent` bytes completed: the chunks it emptied go back, in order.
    void retire_sent(Direction& dir, uint32_t sent);
    void give_back_chunks(Direction& dir);
    void resume_buffer_waiters(ConnectionTable& table, const OutcomeHandler& handle);

    // Leaving (Connection::leaving): whether a direction that would read its source now,
    // holding nothing, waits for the pause instead: when the other direction is quiet,
    // or is delivering what it holds and will be (it takes no more meanwhile).
    bool should_hold(const Connection& conn, Side side) const;
    void hold(Connection& conn, Side side);
    // Adopted with bytes in its pipe (Resumed::unsent): waits for room at the
    // destination and drains them before anything is read; then goes on as a new one.
    Outcome start_with_unsent(Connection& conn, Side side);
    Outcome unsent_delivered(Connection& conn, Side side);

    // Counts bytes delivered and notes the connection as active.
    void count_bytes(Connection& conn, Side side, int moved);

    struct Waiting {
        uint32_t slot;
        uint32_t generation;
        Side side;
    };

    ShardContext& shard_;
    std::deque<Waiting> pipe_waiters_;
    std::deque<Waiting> buffer_waiters_; // copy directions that found no buffer
    std::vector<Waiting> coalescing_;    // bulk directions waiting for the next tick
    bool tick_armed_ = false;
    bool tick_due_ = false; // the tick fired: coalescing_ goes on after this batch
    InFlight in_flight_;    // the pipe retry timer
    bool retry_armed_ = false;
    unsigned parked_now_ = 0; // directions with a parked source
    bool stopping_ = false;
};

} // namespace uringfwd::engine
