// What each control command does, over the engine's public API: a thin client of
// Engine::info(), stats(), route_stats() and, for members and connections, the runtime
// API (uringfwd/runtime.hpp, member_commands.hpp). Runs on the control server's thread;
// every call it makes is one the engine allows from any thread but a shard's.
#pragma once

#include "cli/control/command.hpp"
#include "cli/control/control_server.hpp"
#include "uringfwd/engine.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

namespace uringfwd::cli::control {

// What the binary knows of itself, for `show info`. The load time changes on a SIGHUP
// that applied the file (the main thread), read by the control thread: an atomic.
struct ProcessFacts {
    std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
    std::chrono::system_clock::time_point started_at = std::chrono::system_clock::now();
    std::string config_file;                  // empty: flags only
    std::atomic<int64_t> config_loaded_ms{0}; // system_clock, ms since the epoch

    void loaded_now() {
        config_loaded_ms.store(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
    }
};

// Runs one command against `engine`.
Reply run_command(const Command& command, Engine& engine, const ProcessFacts& facts);

} // namespace uringfwd::cli::control
