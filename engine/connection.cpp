#include "connection.hpp"

namespace uringfwd::engine {

uint32_t ConnectionTable::allocate() {
    uint32_t slot;
    if (!free_.empty()) {
        slot = free_.back();
        free_.pop_back();
    } else {
        slot = static_cast<uint32_t>(slots_.size());
        slots_.push_back(std::make_unique<Connection>());
    }
    Connection& c = *slots_[slot];
    c.in_use = true;
    c.phase = Phase::Connecting;
    c.reset_on_close = false;
    c.ops_in_flight = 0;
    return slot;
}

void ConnectionTable::release(uint32_t slot) {
    Connection& c = *slots_[slot];
    uint32_t next_generation = (c.generation + 1) & 0xffffffu;
    c = Connection{};
    c.generation = next_generation;
    free_.push_back(slot);
}

Connection* ConnectionTable::find(uint32_t slot, uint32_t generation) {
    if (slot >= slots_.size())
        return nullptr;
    Connection& c = *slots_[slot];
    return c.in_use && c.generation == generation ? &c : nullptr;
}

} // namespace uringfwd::engine
