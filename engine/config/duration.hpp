// Durations in the configuration file: a whole number and a unit ("250ms", "2s"), or 0.
// One grammar for every key; busy_poll alone also takes microseconds ("50us"), because
// its useful values lie below a millisecond.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace uringfwd::config {

// parse_duration() (the public one) with "us" accepted as well.
std::optional<std::chrono::microseconds> parse_duration_us(std::string_view text,
                                                           std::string* why = nullptr);

// The shortest text parse_duration_us() reads back as `d`: "1h", "90s", "250ms", "50us".
std::string format_duration(std::chrono::microseconds d);

} // namespace uringfwd::config
