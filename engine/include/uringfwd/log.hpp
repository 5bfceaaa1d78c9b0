// Log levels and the sink an embedding application can replace.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace uringfwd {

enum class LogLevel { Error = 0, Warn = 1, Info = 2, Debug = 3 };

std::string_view to_string(LogLevel level);
// "error", "warn", "info", "debug"; nullopt for anything else.
std::optional<LogLevel> parse_log_level(std::string_view text);

// Receives one complete line (without trailing newline). Called from shard threads,
// possibly concurrently: a sink must be thread-safe. The default writes to stderr.
using LogSink = std::function<void(LogLevel, std::string_view line)>;

// One line in the engine's format, "<UTC time to the ms> <level> <who>: <message>", to
// `sink`, or to stderr with one write(2) when it is empty (lines from several threads
// never interleave). For a front end's own lines, so that the process prints one format.
void write_log_line(const LogSink& sink, LogLevel level, std::string_view who,
                    std::string_view message);

} // namespace uringfwd
