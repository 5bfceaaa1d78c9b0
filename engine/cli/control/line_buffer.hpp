// What one control client has sent and not yet had answered: bytes up to a newline, held
// until a line is complete and never more than kMaxLineBytes of them. The server reads
// only as much as room() allows and takes one line at a time, so a client that sends
// without end holds 4 KiB at most (its line is then too_long()).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace uringfwd::cli::control {

class LineBuffer {
public:
    // How many bytes may be appended now: 0 once a whole line waits or too_long().
    std::size_t room() const;
    // `bytes` (at most room()) after what is held.
    void append(std::string_view bytes);
    // The next complete line without its newline, and forgets it; nullopt while none is.
    std::optional<std::string> take_line();
    // kMaxLineBytes held and no newline among them: the line can never be taken.
    bool too_long() const;
    bool empty() const { return held_.empty(); }
    // A complete line waits to be taken.
    bool has_line() const { return held_.find('\n') != std::string::npos; }

private:
    std::string held_;
};

} // namespace uringfwd::cli::control
