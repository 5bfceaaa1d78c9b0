#include "uringfwd/operations.hpp"

namespace uringfwd {

std::string_view to_string(AccessLogFormat format) {
    return format == AccessLogFormat::Json ? "json" : "text";
}

std::optional<AccessLogFormat> parse_access_log_format(std::string_view text) {
    for (AccessLogFormat f : {AccessLogFormat::Text, AccessLogFormat::Json})
        if (text == to_string(f))
            return f;
    return std::nullopt;
}

} // namespace uringfwd
