// Log level names as they appear on the command line and in log lines.
#include "uringfwd/log.hpp"

#include <array>
#include <utility>

namespace uringfwd {
namespace {

// One table serves both directions so the names cannot drift apart.
constexpr std::array<std::pair<LogLevel, std::string_view>, 4> kNames{{
    {LogLevel::Error, "error"},
    {LogLevel::Warn, "warn"},
    {LogLevel::Info, "info"},
    {LogLevel::Debug, "debug"},
}};

} // namespace

std::string_view to_string(LogLevel level) {
    for (const auto& [value, name] : kNames) {
        if (value == level) {
            return name;
        }
    }
    // Only reachable through a cast of an out-of-range integer.
    return "unknown";
}

std::optional<LogLevel> parse_log_level(std::string_view text) {
    for (const auto& [value, name] : kNames) {
        if (name == text) {
            return value;
        }
    }
    return std::nullopt;
}

} // namespace uringfwd
