// "did you mean ...?" for a misspelt key: typos must not pass silently, and naming the
// intended key turns the error into its own fix.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace uringfwd::config {

// The candidate nearest to `typed` by edit distance, when it is near enough to be the
// likely intent (at most 2 edits, and fewer than half the letters); nullopt otherwise.
std::optional<std::string_view> closest_name(std::string_view typed,
                                             const std::vector<std::string_view>& candidates);

} // namespace uringfwd::config
