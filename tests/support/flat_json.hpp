// A strict parser for what the access log writes: one flat JSON object per line, its
// values strings, integers or null. Enough to prove each line is valid JSON of that
// shape and to read its fields; anything else (nesting, trailing bytes) is an error.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace uringfwd::test {

struct JsonValue {
    enum class Kind { String, Number, Null } kind = Kind::Null;
    std::string text; // the string unescaped, or the number as written
};

// nullopt when `line` is not exactly one such object (RFC 8259 grammar, restricted).
std::optional<std::map<std::string, JsonValue>> parse_flat_json(std::string_view line);

} // namespace uringfwd::test
