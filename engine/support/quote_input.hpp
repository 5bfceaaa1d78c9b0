// Renders text that came from outside (a flag, a config value) inside an error
// message: quoted, control and non-ASCII bytes escaped so the message always stays on
// one printable line, and cut after 120 characters so one bad argument cannot flood
// the log.
#pragma once

#include <string>
#include <string_view>

namespace uringfwd {

std::string quote_input(std::string_view text);

} // namespace uringfwd
