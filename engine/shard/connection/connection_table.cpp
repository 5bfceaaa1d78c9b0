#include "shard/connection/connection.hpp"

namespace uringfwd::engine {

Connection& ConnectionTable::allocate() {
    uint32_t slot;
    if (!free_.empty()) {
        slot = free_.back();
        free_.pop_back();
    } else {
        slot = static_cast<uint32_t>(slots_.size());
        slots_.push_back(std::make_unique<Connection>());
    }
    Connection& c = *slots_[slot];
    c.slot = slot;
    c.in_use = true;
    return c;
}

void ConnectionTable::release(Connection& c) {
    uint32_t slot = c.slot;
    uint32_t next_generation = (c.generation + 1) & OpTag::kGenerationMask;
    c = Connection{};
    c.slot = slot;
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
