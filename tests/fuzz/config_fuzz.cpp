// libFuzzer target for parse_config: any text must come back as a config or as errors
// (never both, never neither); every error must be one printable line that starts with
// "FILE:LINE: " and names a line of the input; and a config must hold only what the
// checks promise (at least one route, each with listeners and a non-backup member).
#include "uringfwd/config_file.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

[[noreturn]] void fail(const char* what, const std::string& detail) {
    std::fprintf(stderr, "%s: %s\n", what, detail.c_str());
    std::abort();
}

// Fixed, so a run never reads sysfs and stays reproducible on any machine.
uringfwd::NumaTopology fixed_topology() {
    uringfwd::NumaTopology t;
    t.node_cpus = {{0, 1}, {2, 3}, {}};
    return t;
}

// toml++ 3.3 reaches __builtin_unreachable() in is_non_ascii_horizontal_whitespace() for
// code points its generated switch has no case for (marzer/tomlplusplus#295, fixed after
// 3.3). Debian's library, built by GCC, answers "not whitespace" there, which is right;
// compiled here under UBSan it stops the run. Inputs holding such a code point are
// skipped so the fuzzer spends its time on everything else. The test mirrors toml++'s own.
bool hits_known_toml_bug(char32_t c) {
    if (c <= 0xA0 || c >= 0xFEFF || c == 0x3000)
        return false;
    const uint64_t child = (static_cast<uint64_t>(c) - 0xA0) / 0x3FA;
    const bool answered_by_mask = ((uint64_t{1} << child) & 0x7FFFFFFFFFFFF75Eull) != 0;
    return !answered_by_mask && child != 5 && child != 7;
}

bool holds_known_toml_bug(std::string_view text) {
    for (std::size_t i = 0; i < text.size(); ++i) {
        const auto b0 = static_cast<unsigned char>(text[i]);
        char32_t c = 0;
        if ((b0 & 0xE0) == 0xC0 && i + 1 < text.size()) {
            c = (char32_t{b0 & 0x1Fu} << 6) | (static_cast<unsigned char>(text[i + 1]) & 0x3Fu);
        } else if ((b0 & 0xF0) == 0xE0 && i + 2 < text.size()) {
            c = (char32_t{b0 & 0x0Fu} << 12) |
                ((static_cast<unsigned char>(text[i + 1]) & 0x3Fu) << 6) |
                (static_cast<unsigned char>(text[i + 2]) & 0x3Fu);
        }
        if (hits_known_toml_bug(c))
            return true;
    }
    return false;
}

void check_error_line(const std::string& error, std::size_t lines_in_input) {
    constexpr std::string_view kPrefix = "fuzz.toml:";
    if (error.rfind(kPrefix, 0) != 0)
        fail("error without the source name", error);
    std::size_t i = kPrefix.size();
    std::size_t line = 0;
    while (i < error.size() && error[i] >= '0' && error[i] <= '9' && line <= lines_in_input + 1)
        line = line * 10 + static_cast<std::size_t>(error[i++] - '0');
    if (line == 0 || line > lines_in_input + 1)
        fail("error line outside the input", error);
    if (error.compare(i, 2, ": ") != 0 || error.size() == i + 2)
        fail("error without ': message'", error);
    if (std::any_of(error.begin(), error.end(), [](unsigned char c) { return c < 0x20; }))
        fail("error with a control character (not one line)", error);
}

void check_config(const uringfwd::EngineConfig& config) {
    if (config.routes.empty())
        fail("config without routes", "");
    for (const uringfwd::RouteConfig& route : config.routes) {
        if (route.name.empty() || route.listen.empty() || route.pool.members.empty())
            fail("route without a name, listener or member", route.name);
        const auto& members = route.pool.members;
        if (std::all_of(members.begin(), members.end(), [](const auto& m) { return m.backup; }))
            fail("route with only backups", route.name);
        for (const auto& m : members)
            if (m.weight < 1 || m.weight > 1000)
                fail("weight out of range", route.name);
    }
    const unsigned n = config.copy.copy_buffers;
    if (n == 0 || (n & (n - 1)) != 0)
        fail("copy_buffers not a power of two", std::to_string(n));
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    if (holds_known_toml_bug(text))
        return 0;
    // Every exception escapes and crashes: parse_config reports problems as errors.
    const uringfwd::ConfigFileResult result =
        uringfwd::parse_config(text, "fuzz.toml", fixed_topology);
    if (result.config.has_value() == !result.errors.empty())
        fail("config and errors must be exclusive", result.config ? "both set" : "neither set");
    const std::size_t lines = static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
    for (const std::string& error : result.errors)
        check_error_line(error, lines);
    if (result.config)
        check_config(*result.config);
    return 0;
}
