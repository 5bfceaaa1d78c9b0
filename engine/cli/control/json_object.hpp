// A JSON object written field by field, for the control socket's `json` replies: keys
// are ours (plain words), string values are escaped (ops/access_log_line.hpp).
#pragma once

#include "ops/access_log_line.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace uringfwd::cli::control {

class JsonObject {
public:
    JsonObject& text(std::string_view key, std::string_view value) {
        start(key);
        ops::append_json_string(out_, value);
        return *this;
    }
    JsonObject& number(std::string_view key, uint64_t value) {
        start(key);
        fmt::format_to(std::back_inserter(out_), "{}", value);
        return *this;
    }
    JsonObject& boolean(std::string_view key, bool value) {
        start(key);
        out_ += value ? "true" : "false";
        return *this;
    }
    // `json` as it is: a number with a fraction, an array, a nested object.
    JsonObject& raw(std::string_view key, std::string_view json) {
        start(key);
        out_ += json;
        return *this;
    }
    std::string done() { return out_ + '}'; }

private:
    void start(std::string_view key) {
        out_ += out_.size() == 1 ? "\"" : ",\"";
        out_ += key;
        out_ += "\":";
    }
    std::string out_ = "{";
};

// ["a","b"]: strings, escaped.
inline std::string json_strings(const std::vector<std::string>& values) {
    std::string out = "[";
    for (const std::string& v : values) {
        if (out.size() > 1)
            out += ',';
        ops::append_json_string(out, v);
    }
    return out + ']';
}

// [x,y]: values already JSON.
inline std::string json_array(const std::vector<std::string>& values) {
    std::string out = "[";
    for (const std::string& v : values) {
        if (out.size() > 1)
            out += ',';
        out += v;
    }
    return out + ']';
}

} // namespace uringfwd::cli::control
