// Moves between shards (Engine::move_connection, rebalance; docs/handover.md "Between
// shards"), the shard's half: which connection may move, and the request that marks
// it leaving. The steps that follow are the hand-over's (connection_handover.cpp).
#include "shard/connection/connections.hpp"

#include <fmt/format.h>

namespace uringfwd::engine {

namespace {

// A move of rebalance's that found its connection never quiet for this long gives up
// (Engine::move_connection's default too).
constexpr std::chrono::seconds kDefaultMoveLimit{5};

} // namespace

std::optional<std::string> Connections::request_move(uint64_t id, int to,
                                                     std::chrono::milliseconds limit,
                                                     const CurrentRoute& current) {
    Connection* found = nullptr;
    table_.for_each_active([&](Connection& conn) {
        if (found == nullptr && conn.record.id == id && conn.phase != Phase::Closing)
            found = &conn;
    });
    if (found == nullptr)
        return std::nullopt;
    if (to == shard_.shard_index)
        return fmt::format("it is on shard {} already", to);
    if (found->phase != Phase::Forwarding)
        return "it is not forwarding yet (still inspecting or connecting)";
    return start_move(*found, to, limit, current);
}

std::size_t Connections::request_moves(std::size_t count, int to, const CurrentRoute& current) {
    std::size_t asked = 0;
    table_.for_each_active([&](Connection& conn) {
        if (asked < count && conn.phase == Phase::Forwarding && conn.move_to < 0 &&
            start_move(conn, to, kDefaultMoveLimit, current).empty())
            ++asked;
    });
    return asked;
}

void Connections::stop_moves() {
    moves_off_ = true;
    if (!moves_.empty())
        pause_leaving_connections(); // gives up those not being paused yet
    // Those being paused stay here too: the shard they would go to may end before it
    // takes them (advance_handover() calls the pause off once it has nowhere to go).
    table_.for_each_active([this](Connection& conn) {
        if (conn.move_to >= 0 && conn.pausing()) {
            conn.move_to = -1;
            conn.leaving = detached_ != nullptr;
            bump(shard_.io.counters().moves_given_up);
            advance_handover(conn);
            settle(conn);
        }
    });
}

std::string Connections::start_move(Connection& conn, int to, std::chrono::milliseconds limit,
                                    const CurrentRoute& current) {
    if (moves_off_)
        return "the engine is stopping";
    if (detached_ != nullptr)
        return "the engine is handing its connections over to a successor";
    if (conn.move_to >= 0)
        return fmt::format("it is moving to shard {} already", conn.move_to);
    if (conn.handover == HandoverStep::Unmovable)
        return "it was taken back from a successor that refused it";
    // A route a reconfiguration retired lives on for its connections only: the other
    // shard has no state of it to carry the connection on with.
    if (!current(*conn.route))
        return "its route was replaced by a reconfiguration";
    conn.move_to = to;
    conn.move_deadline = shard_.now + limit;
    moves_.push_back({conn.slot, conn.generation});
    pause_if_quiet(conn); // an idle one moves at once
    return {};
}

} // namespace uringfwd::engine
