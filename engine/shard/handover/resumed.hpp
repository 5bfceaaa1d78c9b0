// What a connection adopted from another engine (Engine::adopt: an upgrade's
// connection hand-over, docs/handover.md) brings along from there.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace uringfwd::engine {

struct Resumed {
    std::string member;         // its pool member's name there; empty: none
    uint64_t bytes[2] = {0, 0}; // forwarded there, per Side
    std::chrono::steady_clock::time_point opened_at;
    std::chrono::steady_clock::time_point connected_at;
};

} // namespace uringfwd::engine
