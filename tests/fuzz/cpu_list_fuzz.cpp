// libFuzzer target for parse_cpu_list: any input must either be rejected with
// std::invalid_argument or give a sorted, unique, in-range list that survives
// format_cpu_list() unchanged.
#include "uringfwd/cpu_list.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    std::vector<int> cpus;
    try {
        cpus = uringfwd::parse_cpu_list(text);
    } catch (const std::invalid_argument&) {
        return 0; // Rejection is a valid outcome; any other exception escapes and crashes.
    }
    const bool well_formed =
        std::adjacent_find(cpus.begin(), cpus.end(), std::greater_equal<int>()) == cpus.end() &&
        (cpus.empty() || (cpus.front() >= 0 && cpus.back() <= uringfwd::kMaxCpu));
    if (!well_formed) {
        std::fprintf(stderr, "parse_cpu_list returned an unsorted or out-of-range list\n");
        std::abort();
    }
    const std::string printed = uringfwd::format_cpu_list(cpus);
    if (uringfwd::parse_cpu_list(printed) != cpus) {
        std::fprintf(stderr, "round trip changed the list: printed as \"%s\"\n", printed.c_str());
        std::abort();
    }
    return 0;
}
