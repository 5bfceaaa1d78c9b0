// The binary's own lines (start, signals, upgrade, counters, exit, errors) in the
// engine's format, so everything the process prints reads alike and sorts by time:
//   2026-12-01T13:05:01.123Z info uring-fwd: SIGHUP: reloaded /etc/uring-fwd/uring-fwd.toml
// One write(2) per line (uringfwd::write_log_line()), as the shards' lines.
#pragma once

#include "uringfwd/log.hpp"

#include <fmt/format.h>

#include <string>
#include <utility>

namespace uringfwd::cli {

// Writes every level: --log-level filters the engine's lines, while these are one per
// event an operator caused or must know of (the start, a signal, a reload, the exit), as
// they were before they carried a level, and scripts and tests wait for the start line.
class ProcessLog {
public:
    explicit ProcessLog(std::string who) : who_(std::move(who)) {}

    template <typename... Args>
    void error(fmt::format_string<Args...> format, Args&&... args) const {
        write(LogLevel::Error, fmt::format(format, std::forward<Args>(args)...));
    }
    template <typename... Args>
    void warn(fmt::format_string<Args...> format, Args&&... args) const {
        write(LogLevel::Warn, fmt::format(format, std::forward<Args>(args)...));
    }
    template <typename... Args>
    void info(fmt::format_string<Args...> format, Args&&... args) const {
        write(LogLevel::Info, fmt::format(format, std::forward<Args>(args)...));
    }
    template <typename... Args>
    void debug(fmt::format_string<Args...> format, Args&&... args) const {
        write(LogLevel::Debug, fmt::format(format, std::forward<Args>(args)...));
    }

private:
    void write(LogLevel level, const std::string& message) const {
        write_log_line({}, level, who_, message);
    }

    std::string who_;
};

// Under the prefix "uring-fwd".
ProcessLog process_log();

} // namespace uringfwd::cli
