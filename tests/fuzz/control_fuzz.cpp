// libFuzzer target for the control socket's input (engine/cli/control/): bytes as a
// client sends them, cut into reads at positions the input chooses, through LineBuffer
// and parse_command(). Every line must give a command or one printable error line, the
// buffer must never hold more than kMaxLineBytes, and a line it hands out must have
// been sent whole.
#include "cli/control/command.hpp"
#include "cli/control/line_buffer.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

[[noreturn]] void fail(const char* what, std::string_view detail) {
    std::fprintf(stderr, "%s: %.*s\n", what, static_cast<int>(detail.size()), detail.data());
    std::abort();
}

void check_line(const std::string& line) {
    using namespace uringfwd::cli::control;
    if (line.size() >= kMaxLineBytes)
        fail("a line longer than the cap was handed out", line.substr(0, 80));
    if (line.find('\n') != std::string::npos)
        fail("a line holds a newline", line.substr(0, 80));
    const ParseResult r = parse_command(line);
    if (r.command.has_value() == !r.error.empty())
        fail("neither exactly a command nor an error", line.substr(0, 80));
    for (const char c : r.error)
        if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) == 0x7f)
            fail("an error with a control character", r.error);
    if (r.error.size() > 1000)
        fail("an error longer than 1000 bytes", r.error.substr(0, 80));
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace uringfwd::cli::control;
    // The first byte chooses the read size (1..256), as a socket may cut anywhere.
    if (size == 0)
        return 0;
    const std::size_t chunk = std::size_t{data[0]} + 1;
    std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
    LineBuffer buffer;
    while (!input.empty()) {
        const std::size_t n = std::min({chunk, input.size(), buffer.room()});
        if (n == 0) {
            if (buffer.too_long())
                return 0; // the server replies "line too long" and closes
            const auto line = buffer.take_line();
            if (!line)
                fail("no room, not too long, and no line", "");
            check_line(*line);
            continue;
        }
        buffer.append(input.substr(0, n));
        input.remove_prefix(n);
        while (const auto line = buffer.take_line())
            check_line(*line);
    }
    return 0;
}
