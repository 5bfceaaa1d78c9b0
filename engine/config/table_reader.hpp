// Reads one TOML table of the configuration file: typed getters that record an error for
// a value of the wrong type or out of range (and return nullopt), and, at the end, every
// key that no getter asked for, reported as unknown. Messages follow one pattern:
// "<label><key> must be <what is expected>, not <what was found>".
#pragma once

#include "config/error_list.hpp"

#include <toml++/toml.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace uringfwd::config {

// The 1-based line a node starts on.
std::size_t line_of(const toml::node& node);

// A value as a message shows it after "not": strings quoted and escaped, numbers and
// booleans as written, containers by their kind ("a table").
std::string describe(const toml::node& node);

class TableReader {
public:
    // Every message starts with `context` (`route "web": `, or nothing); a message about
    // one of the table's values continues with `prefix` and the key ("upstream weight
    // must be ..."); `where` names the table in unknown-key messages ("in
    // [[route.upstream]]"). Keys passed to the getters must outlive the reader (they are
    // string literals).
    TableReader(const toml::table& table, ErrorList& errors, std::string context,
                std::string prefix, std::string where);

    // The table's own line (its [header]): where a missing key is reported.
    std::size_t line() const { return line_of(table_); }

    // The value of `key`, nullptr when absent; marks the key as known.
    const toml::node* get(std::string_view key);

    std::optional<std::string> string(std::string_view key);
    std::optional<bool> boolean(std::string_view key);
    std::optional<int64_t> integer(std::string_view key, int64_t min, int64_t max);
    // An integer that `ok` accepts; `expected` describes those ("a power of two 1..32768").
    std::optional<int64_t> integer_that(std::string_view key, std::string_view expected,
                                        bool (*ok)(int64_t));
    // A string naming one of `names` (the message lists them).
    std::optional<std::string> one_of(std::string_view key, std::vector<std::string_view> names);
    // Permission bits as an octal string, as chmod(1) writes them ("0660", at most
    // "0777"). A TOML integer is refused: 660 would be decimal, and 0o660 is easy to
    // mistype as that.
    std::optional<unsigned> file_mode(std::string_view key);
    // A duration string (or the integer 0) within min..max (no upper bound without max).
    // Only keys with `micros` take "us".
    std::optional<std::chrono::microseconds> duration(std::string_view key,
                                                      std::chrono::microseconds min,
                                                      std::optional<std::chrono::microseconds> max,
                                                      bool micros = false);
    // A sub-table ([route.health_check]).
    const toml::table* table(std::string_view key);
    // An array of tables ([[route.upstream]]); `header` is how the file writes it.
    const toml::array* array_of_tables(std::string_view key, std::string_view header);

    // Records "<context><prefix><message>".
    void error(std::size_t line, std::string_view message);
    // "<context><prefix><key> must be <expected>, not <describe(value)>" at the value's line.
    void wrong(std::string_view key, const toml::node& value, std::string_view expected);

    // Reports every key of the table that no getter asked for, with a suggestion when one
    // of the known keys is close. Call once, after every getter.
    void report_unknown_keys();

private:
    const toml::table& table_;
    ErrorList& errors_;
    std::string context_;
    std::string prefix_;
    std::string where_;
    std::vector<std::string_view> known_;
};

} // namespace uringfwd::config
