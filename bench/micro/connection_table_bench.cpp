// Cost of the connection table's three operations: allocate on accept, find on every
// completion (the generation check), release when a connection ends.
#include "shard/connection/connection.hpp"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

namespace {

using uringfwd::engine::Connection;
using uringfwd::engine::ConnectionTable;

// Fills a table with `count` live connections and returns their slots.
std::vector<uint32_t> populate(ConnectionTable& table, std::size_t count) {
    std::vector<uint32_t> slots;
    slots.reserve(count);
    for (std::size_t i = 0; i < count; ++i)
        slots.push_back(table.allocate().slot);
    return slots;
}

// One connection's life in the table, with range(0) others alive: allocate reuses a
// free slot, release resets the Connection (the free list is never empty after warm-up).
void BM_ConnectionTable_AllocateRelease(benchmark::State& state) {
    ConnectionTable table;
    populate(table, static_cast<std::size_t>(state.range(0)));
    table.release(table.allocate()); // one free slot ready
    for (auto _ : state) {
        Connection& conn = table.allocate();
        benchmark::DoNotOptimize(conn);
        table.release(conn);
    }
}
BENCHMARK(BM_ConnectionTable_AllocateRelease)->Arg(0)->Arg(1000)->Arg(100000);

// The lookup every connection completion does. Slots are visited in a scattered order
// so a large table shows its cache misses rather than a prefetcher-friendly sweep.
void BM_ConnectionTable_Find(benchmark::State& state) {
    ConnectionTable table;
    const std::vector<uint32_t> slots = populate(table, static_cast<std::size_t>(state.range(0)));
    std::vector<uint32_t> generations;
    generations.reserve(slots.size());
    for (uint32_t s : slots)
        generations.push_back(table.find(s, 0)->generation);
    const std::size_t n = slots.size();
    // A stride coprime with n walks every slot once per n lookups, out of order.
    const std::size_t stride = n > 7919 ? 7919 : 1;
    std::size_t i = 0;
    for (auto _ : state) {
        Connection* c = table.find(slots[i], generations[i]);
        benchmark::DoNotOptimize(c);
        i += stride;
        if (i >= n)
            i -= n;
    }
}
BENCHMARK(BM_ConnectionTable_Find)->Arg(1000)->Arg(100000);

// A stale completion (the slot was reused since): find must reject it.
void BM_ConnectionTable_FindStale(benchmark::State& state) {
    ConnectionTable table;
    Connection& first = table.allocate();
    const uint32_t slot = first.slot;
    const uint32_t old_generation = first.generation;
    table.release(first);
    (void)table.allocate(); // the same slot again, with the next generation
    for (auto _ : state) {
        Connection* c = table.find(slot, old_generation);
        benchmark::DoNotOptimize(c);
    }
}
BENCHMARK(BM_ConnectionTable_FindStale);

} // namespace
