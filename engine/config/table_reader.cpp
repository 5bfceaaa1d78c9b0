#include "config/table_reader.hpp"

#include "config/closest_name.hpp"
#include "support/quote_input.hpp"
#include "uringfwd/config_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace uringfwd::config {
namespace {

// A key as a message shows it: plain keys in single quotes (as users type them), anything
// else escaped so the message stays on one line.
std::string show_key(std::string_view key) {
    const bool plain =
        !key.empty() && key.size() <= 64 && std::all_of(key.begin(), key.end(), [](char c) {
            return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   c == '_' || c == '-';
        });
    return plain ? fmt::format("'{}'", key) : quote_input(key);
}

std::string join_choices(const std::vector<std::string_view>& names) {
    std::string out;
    for (std::size_t i = 0; i < names.size(); ++i) {
        if (i > 0)
            out += i + 1 == names.size() ? " or " : ", ";
        out += names[i];
    }
    return out;
}

} // namespace

std::size_t line_of(const toml::node& node) {
    return node.source().begin.line;
}

std::string describe(const toml::node& node) {
    switch (node.type()) {
    case toml::node_type::string:
        return quote_input(node.as_string()->get());
    case toml::node_type::integer:
        return fmt::format("{}", node.as_integer()->get());
    case toml::node_type::floating_point:
        return fmt::format("{}", node.as_floating_point()->get());
    case toml::node_type::boolean:
        return node.as_boolean()->get() ? "true" : "false";
    case toml::node_type::table:
        return "a table";
    case toml::node_type::array:
        return "an array";
    case toml::node_type::date:
        return "a date";
    case toml::node_type::time:
        return "a time";
    case toml::node_type::date_time:
        return "a date-time";
    case toml::node_type::none:
        break;
    }
    return "nothing";
}

TableReader::TableReader(const toml::table& table, ErrorList& errors, std::string context,
                         std::string prefix, std::string where)
    : table_(table), errors_(errors), context_(std::move(context)), prefix_(std::move(prefix)),
      where_(std::move(where)) {}

const toml::node* TableReader::get(std::string_view key) {
    if (std::find(known_.begin(), known_.end(), key) == known_.end())
        known_.push_back(key);
    return table_.get(key);
}

std::optional<std::string> TableReader::string(std::string_view key) {
    const toml::node* node = get(key);
    if (node == nullptr)
        return std::nullopt;
    if (!node->is_string()) {
        wrong(key, *node, "a string");
        return std::nullopt;
    }
    return node->as_string()->get();
}

std::optional<bool> TableReader::boolean(std::string_view key) {
    const toml::node* node = get(key);
    if (node == nullptr)
        return std::nullopt;
    if (!node->is_boolean()) {
        wrong(key, *node, "true or false");
        return std::nullopt;
    }
    return node->as_boolean()->get();
}

std::optional<int64_t> TableReader::integer(std::string_view key, int64_t min, int64_t max) {
    const toml::node* node = get(key);
    if (node == nullptr)
        return std::nullopt;
    const std::string range = max == std::numeric_limits<int64_t>::max()
                                  ? fmt::format("{} or more", min)
                                  : fmt::format("{}..{}", min, max);
    if (!node->is_integer()) {
        wrong(key, *node, fmt::format("an integer ({})", range));
        return std::nullopt;
    }
    const int64_t value = node->as_integer()->get();
    if (value < min || value > max) {
        wrong(key, *node, range);
        return std::nullopt;
    }
    return value;
}

std::optional<int64_t> TableReader::integer_that(std::string_view key, std::string_view expected,
                                                 bool (*ok)(int64_t)) {
    const toml::node* node = get(key);
    if (node == nullptr)
        return std::nullopt;
    if (!node->is_integer() || !ok(node->as_integer()->get())) {
        wrong(key, *node, expected);
        return std::nullopt;
    }
    return node->as_integer()->get();
}

std::optional<std::string> TableReader::one_of(std::string_view key,
                                               std::vector<std::string_view> names) {
    const toml::node* node = get(key);
    if (node == nullptr)
        return std::nullopt;
    if (node->is_string()) {
        const std::string& value = node->as_string()->get();
        if (std::find(names.begin(), names.end(), value) != names.end())
            return value;
    }
    wrong(key, *node, join_choices(names));
    return std::nullopt;
}

std::optional<unsigned> TableReader::file_mode(std::string_view key) {
    const toml::node* node = get(key);
    if (node == nullptr)
        return std::nullopt;
    constexpr std::string_view kExpected = "an octal string such as \"0660\" (at most \"0777\")";
    const std::string* text = node->is_string() ? &node->as_string()->get() : nullptr;
    const bool octal =
        text != nullptr && !text->empty() && text->size() <= 4 &&
        std::all_of(text->begin(), text->end(), [](char c) { return c >= '0' && c <= '7'; });
    const unsigned value = octal ? static_cast<unsigned>(std::stoul(*text, nullptr, 8)) : 0;
    if (!octal || value > 0777) {
        wrong(key, *node, kExpected);
        return std::nullopt;
    }
    return value;
}

std::optional<std::chrono::microseconds>
TableReader::duration(std::string_view key, std::chrono::microseconds min,
                      std::optional<std::chrono::microseconds> max, bool micros) {
    const toml::node* node = get(key);
    if (node == nullptr)
        return std::nullopt;
    constexpr std::string_view kExpected = "a duration such as \"2s\"";
    if (node->is_integer() && node->as_integer()->get() != 0) {
        // A bare number has no unit; the fix is to quote it with one.
        error(line_of(*node),
              fmt::format("{} must be {}, not {} (a number needs a unit, in "
                          "quotes: \"{}s\")",
                          key, kExpected, describe(*node), node->as_integer()->get()));
        return std::nullopt;
    }
    std::optional<std::chrono::microseconds> value;
    if (node->is_integer()) {
        value = std::chrono::microseconds{0};
    } else if (node->is_string()) {
        std::string why;
        const std::string& text = node->as_string()->get();
        if (micros) {
            value = parse_duration_us(text, &why);
        } else if (auto ms = parse_duration(text, &why)) {
            value = *ms;
        }
        if (!value) {
            error(line_of(*node),
                  fmt::format("{} must be {}, not {}: {}", key, kExpected, quote_input(text), why));
            return std::nullopt;
        }
    } else {
        wrong(key, *node, kExpected);
        return std::nullopt;
    }
    if (*value < min || (max && *value > *max)) {
        wrong(key, *node,
              max ? fmt::format("{}..{}", format_duration(min), format_duration(*max))
                  : fmt::format("at least {}", format_duration(min)));
        return std::nullopt;
    }
    return value;
}

const toml::table* TableReader::table(std::string_view key) {
    const toml::node* node = get(key);
    if (node == nullptr)
        return nullptr;
    if (!node->is_table()) {
        wrong(key, *node, "a table");
        return nullptr;
    }
    return node->as_table();
}

const toml::array* TableReader::array_of_tables(std::string_view key, std::string_view header) {
    const toml::node* node = get(key);
    if (node == nullptr)
        return nullptr;
    // An empty array is an array of no tables: the caller says at least one is needed.
    const bool empty_array = node->is_array() && node->as_array()->empty();
    if (!node->is_array_of_tables() && !empty_array) {
        wrong(key, *node, fmt::format("an array of tables (written {})", header));
        return nullptr;
    }
    return node->as_array();
}

void TableReader::error(std::size_t line, std::string_view message) {
    errors_.add(line, fmt::format("{}{}{}", context_, prefix_, message));
}

void TableReader::wrong(std::string_view key, const toml::node& value, std::string_view expected) {
    error(line_of(value), fmt::format("{} must be {}, not {}", key, expected, describe(value)));
}

void TableReader::report_unknown_keys() {
    for (const auto& [key, value] : table_) {
        const std::string_view name = key.str();
        if (std::find(known_.begin(), known_.end(), name) != known_.end())
            continue;
        std::string message = fmt::format("unknown key {} {}", show_key(name), where_);
        if (auto near = closest_name(name, known_))
            message += fmt::format(" (did you mean '{}'?)", *near);
        const std::size_t line = key.source().begin.line;
        errors_.add(line != 0 ? line : line_of(value), context_ + message);
    }
}

} // namespace uringfwd::config
