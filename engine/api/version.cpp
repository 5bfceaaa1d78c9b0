#include "uringfwd/version.hpp"

namespace uringfwd {

// Compiled into the library, so the string is the library's own version even when the
// application was built against older headers.
std::string_view version() noexcept {
    return URINGFWD_VERSION_STRING;
}

} // namespace uringfwd
