#include "tests/support/flat_json.hpp"

#include <cctype>

namespace uringfwd::test {
namespace {

struct Reader {
    std::string_view s;
    std::size_t i = 0;

    void spaces() {
        while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n'))
            ++i;
    }
    bool take(char c) {
        spaces();
        if (i < s.size() && s[i] == c) {
            ++i;
            return true;
        }
        return false;
    }
    static int hex(char c) {
        if (c >= '0' && c <= '9')
            return c - '0';
        if (c >= 'a' && c <= 'f')
            return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
            return c - 'A' + 10;
        return -1;
    }
    std::optional<std::string> string() {
        if (!take('"'))
            return std::nullopt;
        std::string out;
        while (i < s.size()) {
            const char c = s[i++];
            if (c == '"')
                return out;
            if (static_cast<unsigned char>(c) < 0x20)
                return std::nullopt; // control characters must be escaped
            if (c != '\\') {
                out += c;
                continue;
            }
            if (i >= s.size())
                return std::nullopt;
            const char e = s[i++];
            switch (e) {
            case '"':
            case '\\':
            case '/':
                out += e;
                break;
            case 'n':
                out += '\n';
                break;
            case 't':
                out += '\t';
                break;
            case 'r':
                out += '\r';
                break;
            case 'b':
                out += '\b';
                break;
            case 'f':
                out += '\f';
                break;
            case 'u': {
                if (i + 4 > s.size())
                    return std::nullopt;
                int v = 0;
                for (int k = 0; k < 4; ++k) {
                    const int h = hex(s[i++]);
                    if (h < 0)
                        return std::nullopt;
                    v = v * 16 + h;
                }
                if (v >= 0x80)
                    return std::nullopt; // not needed here
                out += static_cast<char>(v);
                break;
            }
            default:
                return std::nullopt;
            }
        }
        return std::nullopt;
    }
    std::optional<JsonValue> value() {
        spaces();
        if (i < s.size() && s[i] == '"') {
            auto text = string();
            if (!text)
                return std::nullopt;
            return JsonValue{JsonValue::Kind::String, *text};
        }
        if (s.substr(i, 4) == "null") {
            i += 4;
            return JsonValue{JsonValue::Kind::Null, {}};
        }
        const std::size_t start = i;
        if (i < s.size() && s[i] == '-')
            ++i;
        if (i >= s.size() || !std::isdigit(static_cast<unsigned char>(s[i])))
            return std::nullopt;
        if (s[i] == '0' && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1])))
            return std::nullopt; // no leading zeros
        while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])))
            ++i;
        return JsonValue{JsonValue::Kind::Number, std::string(s.substr(start, i - start))};
    }
};

} // namespace

std::optional<std::map<std::string, JsonValue>> parse_flat_json(std::string_view line) {
    Reader r{line};
    std::map<std::string, JsonValue> out;
    if (!r.take('{'))
        return std::nullopt;
    if (!r.take('}')) {
        do {
            auto key = r.string();
            if (!key || !r.take(':'))
                return std::nullopt;
            auto v = r.value();
            if (!v || !out.emplace(*key, *v).second)
                return std::nullopt;
        } while (r.take(','));
        if (!r.take('}'))
            return std::nullopt;
    }
    r.spaces();
    if (r.i != line.size())
        return std::nullopt;
    return out;
}

} // namespace uringfwd::test
