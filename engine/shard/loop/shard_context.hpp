// What a shard's owners (its connections and their directions) share: the shard's
// I/O layer, its pipes and copy buffers, and its settings. Owned by the shard.
#pragma once

#include "pipes/pipe_pool.hpp"
#include "shard/loop/shard_doorbells.hpp"
#include "shard/loop/shard_io.hpp"
#include "support/logger.hpp"
#include "uring/provided_buffers.hpp"
#include "uringfwd/config.hpp"

#include <chrono>

namespace uringfwd::engine {

struct ShardContext {
    ShardIo& io;
    pipes::PipePool& pool;
    uring::ProvidedBuffers* buffers; // null when the shard splices only
    // The copy path's large buffers for bulk directions (Copy only; null: none), and
    // whether receives into them may fill several at once (receive bundles).
    uring::ProvidedBuffers* bulk_buffers;
    bool bundles;
    DataPath data_path; // what the shard really does (config or fallback)
    const EngineConfig& config;
    const Logger& log;
    int shard_index = 0;
    // Every shard's wake-up: room given back at a shared limit rings those waiting.
    const ShardDoorbells* doorbells = nullptr;
    // Sockets go into slots of the ring's registered file table (direct descriptors):
    // the engine asked for them and this kernel has every piece (Shard::setup_ring()).
    bool direct = false;
    // Splicing directions splice inline, with splice(2) on the shard's thread, instead
    // of through the ring (SpliceMechanism; Shard::setup() decides).
    bool inline_splice = false;
    // The time of the batch of completions being handled: read once per batch.
    std::chrono::steady_clock::time_point now{};
};

} // namespace uringfwd::engine
