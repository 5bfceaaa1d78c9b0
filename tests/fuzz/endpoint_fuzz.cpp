// libFuzzer target for Endpoint::parse: any input must either be rejected with
// std::invalid_argument or round-trip exactly through to_string().
#include "uringfwd/endpoint.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    uringfwd::Endpoint parsed;
    try {
        parsed = uringfwd::Endpoint::parse(text);
    } catch (const std::invalid_argument&) {
        return 0; // Rejection is a valid outcome; any other exception escapes and crashes.
    }
    const std::string printed = parsed.to_string();
    // Not caught: text that parse() accepted once must stay acceptable after printing.
    if (uringfwd::Endpoint::parse(printed) != parsed) {
        std::fprintf(stderr, "round trip changed the endpoint: printed as \"%s\"\n",
                     printed.c_str());
        std::abort();
    }
    return 0;
}
