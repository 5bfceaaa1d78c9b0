#include "config/closest_name.hpp"

#include <algorithm>
#include <cstddef>

namespace uringfwd {
namespace {

// Keys are short, so the plain two-row Levenshtein distance is cheap enough. Capped input
// keeps a fuzzer's megabyte-long key from costing seconds.
constexpr std::size_t kLongestCompared = 64;

std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> prev(b.size() + 1);
    std::vector<std::size_t> cur(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j)
        prev[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        cur[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t substitute = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
            cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, substitute});
        }
        std::swap(prev, cur);
    }
    return prev[b.size()];
}

} // namespace

std::optional<std::string_view> closest_name(std::string_view typed,
                                             const std::vector<std::string_view>& candidates) {
    if (typed.size() > kLongestCompared)
        return std::nullopt;
    std::optional<std::string_view> best;
    std::size_t best_distance = 0;
    for (std::string_view candidate : candidates) {
        const std::size_t d = edit_distance(typed, candidate);
        if (!best || d < best_distance) {
            best = candidate;
            best_distance = d;
        }
    }
    if (!best || best_distance > 2 || best_distance * 2 >= typed.size())
        return std::nullopt;
    return best;
}

} // namespace uringfwd
