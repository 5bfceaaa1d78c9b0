// Many simultaneous clients of an echo path: every connection is opened before any data
// flows (so they are truly concurrent in the proxy), then each sends its own payload,
// FINs, and checks the echo byte-for-byte until EOF. A few threads multiplex all
// connections with poll() to stay within two cores.
#pragma once

#include "tests/support/deadline.hpp"
#include "uringfwd/endpoint.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace uringfwd::test {

struct EchoLoadResult {
    std::size_t connected = 0;
    std::size_t verified = 0;          // echoed in full, intact, then EOF
    std::vector<std::string> failures; // the first few, for the assertion message
};

EchoLoadResult run_echo_load(const Endpoint& proxy, std::size_t connections, std::size_t bytes_each,
                             std::size_t threads, const Deadline& deadline);

} // namespace uringfwd::test
