// The errors found in one configuration file, collected rather than thrown so that a
// user sees all of them at once.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace uringfwd::config {

class ErrorList {
public:
    explicit ErrorList(std::string_view source_name) : source_(source_name) {}

    // `line` is 1-based; 0 (a position toml++ does not know) is reported as line 1 so
    // every error keeps the FILE:LINE form editors jump to.
    void add(std::size_t line, std::string message);

    bool empty() const { return entries_.empty(); }

    // "FILE:LINE: message" each, ordered by line (in the order found within a line), so
    // the output reads like the file.
    std::vector<std::string> lines() const;

private:
    struct Entry {
        std::size_t line;
        std::string message;
    };
    std::string source_;
    std::vector<Entry> entries_;
};

} // namespace uringfwd::config
