// cpulist parsing and formatting; see cpu_list.hpp for the accepted syntax.
#include "uringfwd/cpu_list.hpp"

#include "support/quote_input.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <stdexcept>

namespace uringfwd {
namespace {

[[noreturn]] void fail(std::string_view text, std::string_view why) {
    throw std::invalid_argument(fmt::format("bad CPU list {}: {}", quote_input(text), why));
}

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

// A cursor over the whole input, so every error can quote the full text it came from.
class Reader {
public:
    explicit Reader(std::string_view text) : text_(text) {}

    void skip_space() {
        while (pos_ < text_.size() && is_space(text_[pos_])) {
            ++pos_;
        }
    }
    bool at_end() const { return pos_ == text_.size(); }
    bool consume(char c) {
        if (pos_ < text_.size() && text_[pos_] == c) {
            ++pos_;
            return true;
        }
        return false;
    }

    int number() {
        skip_space();
        if (pos_ == text_.size() || !is_digit(text_[pos_])) {
            fail(text_, "expected a CPU number (lists look like \"0-7,16-23\")");
        }
        int value = 0;
        while (pos_ < text_.size() && is_digit(text_[pos_])) {
            value = value * 10 + (text_[pos_] - '0');
            // Checked per digit so arbitrarily long numbers cannot overflow.
            if (value > kMaxCpu) {
                fail(text_, fmt::format("CPU numbers must be 0-{}", kMaxCpu));
            }
            ++pos_;
        }
        skip_space();
        return value;
    }

    [[noreturn]] void fail_here(std::string_view why) const { fail(text_, why); }

private:
    std::string_view text_;
    std::size_t pos_ = 0;
};

} // namespace

std::vector<int> parse_cpu_list(std::string_view text) {
    Reader in(text);
    in.skip_space();
    if (in.at_end()) {
        return {};
    }
    // A bitmap indexed by CPU sorts and deduplicates in one pass, and its size is bounded
    // by kMaxCpu no matter how many overlapping ranges the input repeats.
    std::vector<bool> seen(kMaxCpu + 1, false);
    do {
        const int first = in.number();
        int last = first;
        if (in.consume('-')) {
            last = in.number();
            if (last < first) {
                in.fail_here(fmt::format("range {}-{} is reversed", first, last));
            }
        }
        for (int cpu = first; cpu <= last; ++cpu) {
            seen[static_cast<std::size_t>(cpu)] = true;
        }
    } while (in.consume(','));
    if (!in.at_end()) {
        in.fail_here("expected ',' or '-' between CPU numbers");
    }
    std::vector<int> cpus;
    for (int cpu = 0; cpu <= kMaxCpu; ++cpu) {
        if (seen[static_cast<std::size_t>(cpu)]) {
            cpus.push_back(cpu);
        }
    }
    return cpus;
}

std::string format_cpu_list(const std::vector<int>& cpus) {
    std::vector<int> sorted = cpus;
    std::sort(sorted.begin(), sorted.end());
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    if (!sorted.empty() && (sorted.front() < 0 || sorted.back() > kMaxCpu)) {
        throw std::invalid_argument(fmt::format("CPU number {} is outside 0-{}",
                                                sorted.front() < 0 ? sorted.front() : sorted.back(),
                                                kMaxCpu));
    }
    std::string out;
    for (std::size_t i = 0; i < sorted.size();) {
        std::size_t j = i;
        while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) {
            ++j;
        }
        if (!out.empty()) {
            out += ',';
        }
        out += j == i ? fmt::format("{}", sorted[i]) : fmt::format("{}-{}", sorted[i], sorted[j]);
        i = j + 1;
    }
    return out;
}

} // namespace uringfwd
