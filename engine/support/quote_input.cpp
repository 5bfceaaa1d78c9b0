#include "support/quote_input.hpp"

#include <fmt/format.h>

namespace uringfwd {

namespace {
constexpr std::size_t kMaxQuoted = 120;
}

std::string quote_input(std::string_view text) {
    std::string out = "\"";
    const std::size_t shown = text.size() > kMaxQuoted ? kMaxQuoted : text.size();
    for (std::size_t i = 0; i < shown; ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c < 0x20 || c >= 0x7f) {
            out += fmt::format("\\x{:02x}", c);
        } else {
            out += static_cast<char>(c);
        }
    }
    if (shown < text.size())
        out += "...";
    out += '"';
    return out;
}

} // namespace uringfwd
