// Words of the engine's messages, for a front end (the uring-fwd binary) whose own lines
// should read as the engine's do.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace uringfwd {

// "1 shard", "2 shards": a count and its noun, in the number the count needs (a line
// that says "1 errors" reads as careless). `plural` defaults to `singular` + "s".
inline std::string count_of(uint64_t n, std::string_view singular, std::string_view plural = {}) {
    std::string out = std::to_string(n) + ' ';
    if (n == 1 || plural.empty())
        out += singular;
    if (n != 1)
        out += plural.empty() ? std::string_view("s") : plural;
    return out;
}

// Text that came from outside (a flag, a config value) inside an error message: quoted,
// control and non-ASCII bytes escaped so the message always stays on one printable
// line, and cut after 120 characters so one bad argument cannot flood the log.
std::string quote_input(std::string_view text);

// "did you mean ...?" for a misspelt name (a configuration key, a control command): the
// candidate nearest to `typed` by edit distance, when it is near enough to be the likely
// intent (at most 2 edits, and fewer than half the letters); nullopt otherwise.
std::optional<std::string_view> closest_name(std::string_view typed,
                                             const std::vector<std::string_view>& candidates);

} // namespace uringfwd
