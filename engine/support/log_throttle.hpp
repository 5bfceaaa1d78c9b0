// Keeps a burst of identical failures (a dead upstream, an fd storm) from flooding the
// log: at most `burst` lines per window for one kind of event; the next line let
// through says how many were left out, in the one wording suppressed_note() gives every
// throttled message. Pure logic; the caller passes the time.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace uringfwd::engine {

class LogThrottle {
public:
    using Clock = std::chrono::steady_clock;

    explicit LogThrottle(unsigned burst = 5, Clock::duration window = std::chrono::seconds(1))
        : burst_(burst), window_(window) {}

    // Whether to log this event now. When it returns true, suppressed() tells how many
    // events were left out since the last line (to append to it).
    bool allow(Clock::time_point now) {
        if (now - window_start_ >= window_) {
            window_start_ = now;
            in_window_ = 0;
        }
        if (in_window_ < burst_) {
            ++in_window_;
            report_ = pending_;
            pending_ = 0;
            return true;
        }
        ++pending_;
        return false;
    }

    uint64_t suppressed() const { return report_; }

private:
    unsigned burst_;
    Clock::duration window_;
    Clock::time_point window_start_{};
    unsigned in_window_ = 0;
    uint64_t pending_ = 0; // left out since the last line
    uint64_t report_ = 0;  // what the last allowed line should mention
};

// The end of a line let through after `suppressed` like it were left out:
// " (12 more suppressed)", or nothing.
inline std::string suppressed_note(uint64_t suppressed) {
    return suppressed == 0 ? std::string() : fmt::format(" ({} more suppressed)", suppressed);
}

} // namespace uringfwd::engine
