// Durations in the configuration file and the flags: a whole number and a unit ("250ms",
// "2s"), or 0; "us" too where microseconds matter (uringfwd/config_file.hpp).
#include "support/quote_input.hpp"
#include "uringfwd/config_file.hpp"

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <limits>

namespace uringfwd {
namespace config {
namespace {

struct Unit {
    std::string_view name;
    int64_t micros;
};
// Largest first, so format_duration() picks the largest unit that divides exactly.
constexpr std::array<Unit, 5> kUnits{{
    {"h", int64_t{3600} * 1000 * 1000},
    {"m", int64_t{60} * 1000 * 1000},
    {"s", 1000 * 1000},
    {"ms", 1000},
    {"us", 1},
}};

void set_why(std::string* why, std::string text) {
    if (why != nullptr)
        *why = std::move(text);
}

std::optional<std::chrono::microseconds> parse(std::string_view text, bool allow_us,
                                               std::string* why) {
    const std::string_view units = allow_us ? "us, ms, s, m or h" : "ms, s, m or h";
    if (text.empty()) {
        set_why(why, "empty");
        return std::nullopt;
    }
    if (text.front() == '-') {
        set_why(why, "must not be negative");
        return std::nullopt;
    }
    std::size_t i = 0;
    int64_t value = 0;
    // Digit by digit with an overflow check: a long run of digits is an error, not UB.
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
        if (value > (std::numeric_limits<int64_t>::max() - 9) / 10) {
            set_why(why, "too large");
            return std::nullopt;
        }
        value = value * 10 + (text[i] - '0');
    }
    if (i == 0) {
        set_why(why, "must start with a whole number");
        return std::nullopt;
    }
    const std::string_view unit = text.substr(i);
    if (unit.empty()) {
        if (value == 0)
            return std::chrono::microseconds{0};
        set_why(why, fmt::format("has no unit (use {}; only 0 goes without)", units));
        return std::nullopt;
    }
    if (unit.front() == '.') {
        set_why(why, "must be a whole number (use a smaller unit: 1500ms, not 1.5s)");
        return std::nullopt;
    }
    for (const Unit& u : kUnits) {
        if (u.name != unit || (u.name == "us" && !allow_us))
            continue;
        if (value > std::numeric_limits<int64_t>::max() / u.micros) {
            set_why(why, "too large");
            return std::nullopt;
        }
        return std::chrono::microseconds{value * u.micros};
    }
    set_why(why, fmt::format("unknown unit {} (use {})", quote_input(unit), units));
    return std::nullopt;
}

} // namespace
} // namespace config

std::optional<std::chrono::microseconds> parse_duration_us(std::string_view text,
                                                           std::string* why) {
    return config::parse(text, true, why);
}

std::string format_duration(std::chrono::microseconds d) {
    const int64_t micros = d.count();
    if (micros == 0)
        return "0";
    for (const config::Unit& u : config::kUnits)
        if (micros % u.micros == 0)
            return fmt::format("{}{}", micros / u.micros, u.name);
    return fmt::format("{}us", micros); // unreachable: 1us divides everything
}

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text, std::string* why) {
    const auto micros = config::parse(text, false, why);
    if (!micros)
        return std::nullopt;
    // Exact: without "us" every unit is a whole number of milliseconds.
    return std::chrono::duration_cast<std::chrono::milliseconds>(*micros);
}

} // namespace uringfwd
