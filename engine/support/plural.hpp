// "1 shard", "2 shards": a count and its noun, in the number the count needs, for every
// message that counts something (a line that says "1 errors" reads as careless).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace uringfwd::engine {

// `plural` defaults to `singular` + "s" (words such as "CPU" and "socket" take it).
inline std::string count_of(uint64_t n, std::string_view singular, std::string_view plural = {}) {
    if (n == 1)
        return fmt::format("1 {}", singular);
    if (plural.empty())
        return fmt::format("{} {}s", n, singular);
    return fmt::format("{} {}", n, plural);
}

} // namespace uringfwd::engine
