#include "config/error_list.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace uringfwd::config {

void ErrorList::add(std::size_t line, std::string message) {
    // A message is one line by contract; user text reaches it only through
    // quote_input(), but a stray control character from a library message must not
    // split it either.
    std::replace_if(
        message.begin(), message.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; }, ' ');
    entries_.push_back({line == 0 ? 1 : line, std::move(message)});
}

std::vector<std::string> ErrorList::lines() const {
    std::vector<Entry> sorted = entries_;
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const Entry& a, const Entry& b) { return a.line < b.line; });
    std::vector<std::string> out;
    out.reserve(sorted.size());
    for (const Entry& e : sorted)
        out.push_back(fmt::format("{}:{}: {}", source_, e.line, e.message));
    return out;
}

} // namespace uringfwd::config
