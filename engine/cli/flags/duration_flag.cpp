#include "cli/flags/duration_flag.hpp"

#include "uringfwd/config_file.hpp"
#include "uringfwd/messages.hpp"

#include <fmt/format.h>

namespace uringfwd::cli {

std::optional<std::chrono::microseconds>
parse_flag_duration(const std::string& text, const DurationRange& range, std::string* why) {
    if (range.micros)
        return parse_duration_us(text, why);
    if (auto ms = parse_duration(text, why))
        return *ms;
    return std::nullopt;
}

std::string duration_problem(const std::string& text, const DurationRange& range) {
    std::string why;
    const std::optional<std::chrono::microseconds> value = parse_flag_duration(text, range, &why);
    if (!value)
        return fmt::format("{} {}", quote_input(text), why);
    if (*value < range.min || (range.max && *value > *range.max))
        return fmt::format("must be {}, not {}",
                           range.max ? fmt::format("{}..{}", format_duration(range.min),
                                                   format_duration(*range.max))
                                     : fmt::format("at least {}", format_duration(range.min)),
                           quote_input(text));
    return {};
}

CLI::Option* add_duration(CLI::App& app, const char* name, std::string& into,
                          const std::string& help, DurationRange range) {
    return app.add_option(name, into, help)
        ->type_name("DURATION")
        ->check(CLI::Validator([range](std::string& text) { return duration_problem(text, range); },
                               ""))
        ->capture_default_str();
}

} // namespace uringfwd::cli
