#include "cli/control/line_buffer.hpp"

#include "cli/control/command.hpp"

namespace uringfwd::cli::control {

std::size_t LineBuffer::room() const {
    if (held_.find('\n') != std::string::npos || held_.size() >= kMaxLineBytes)
        return 0;
    return kMaxLineBytes - held_.size();
}

void LineBuffer::append(std::string_view bytes) {
    held_.append(bytes.substr(0, room()));
}

std::optional<std::string> LineBuffer::take_line() {
    const std::size_t newline = held_.find('\n');
    if (newline == std::string::npos)
        return std::nullopt;
    std::string line = held_.substr(0, newline);
    held_.erase(0, newline + 1);
    return line;
}

bool LineBuffer::too_long() const {
    return held_.size() >= kMaxLineBytes && held_.find('\n') == std::string::npos;
}

} // namespace uringfwd::cli::control
