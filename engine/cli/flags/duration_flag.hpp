// Duration flags: the configuration file's syntax ("250ms", "5m", "0") and, for the same
// setting, the file's range (engine_section.cpp, route_section.cpp), so a value is good
// or bad in both.
#pragma once

#include <CLI/CLI.hpp>

#include <chrono>
#include <optional>
#include <string>

namespace uringfwd::cli {

struct DurationRange {
    std::chrono::microseconds min;
    std::optional<std::chrono::microseconds> max;
    bool micros = false; // "us" too (busy_poll)
};

using namespace std::chrono_literals;
inline constexpr DurationRange kConnectTimeout{1ms, 1h};
inline constexpr DurationRange kIdleTimeout{0us, std::nullopt};
inline constexpr DurationRange kInspectTimeout{1ms, 1h};
inline constexpr DurationRange kBusyPoll{0us, 1s, true};
inline constexpr DurationRange kBulkCoalesce{0us, 100ms, true};
inline constexpr DurationRange kBulkPark{0us, 1s};
inline constexpr DurationRange kDrainTimeout{0us, 24h};
inline constexpr DurationRange kAccessLogFlush{1ms, 1h};

// `text` as the file reads a duration (with "us" where the range allows it).
std::optional<std::chrono::microseconds> parse_flag_duration(const std::string& text,
                                                             const DurationRange& range,
                                                             std::string* why = nullptr);

// The reason `text` is no duration within `range`, or "" when it is one.
std::string duration_problem(const std::string& text, const DurationRange& range);

// A duration flag: checked while parsing (CLI11 names the flag: "--idle-timeout: \"30\"
// has no unit (use ms, s, m or h; only 0 goes without)"), shown in --help as DURATION.
CLI::Option* add_duration(CLI::App& app, const char* name, std::string& into,
                          const std::string& help, DurationRange range);

// The value of a duration flag its check accepted.
template <typename Duration> Duration duration_flag(const std::string& text, DurationRange range) {
    return std::chrono::duration_cast<Duration>(parse_flag_duration(text, range).value_or(0us));
}

} // namespace uringfwd::cli
