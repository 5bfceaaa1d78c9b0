// The decisions of the active health checker, without any I/O: when a run of passed or
// failed checks changes a member's state, and what a reply read so far means. Pure
// logic, unit-tested (tests/unit/health_rules_test.cpp); health_checker.cpp does the I/O.
#pragma once

#include <algorithm>
#include <string_view>

namespace uringfwd::engine {

// Counts results in a row: `rise` consecutive passes bring a down target up, `fall`
// consecutive failures take an up target down. A single result against the run resets
// it, so a flapping member keeps its state. A threshold of 0 acts as 1.
class RiseFall {
public:
    enum class Change { None, WentUp, WentDown };

    RiseFall(bool up, unsigned rise, unsigned fall)
        : up_(up), rise_(std::max(rise, 1u)), fall_(std::max(fall, 1u)) {}

    Change record(bool passed) {
        if (passed) {
            failures_ = 0;
            ++passes_;
            if (!up_ && passes_ >= rise_) {
                up_ = true;
                return Change::WentUp;
            }
        } else {
            passes_ = 0;
            ++failures_;
            if (up_ && failures_ >= fall_) {
                up_ = false;
                return Change::WentDown;
            }
        }
        return Change::None;
    }

    bool up() const { return up_; }
    // Results in a row that agree with the last one: what a transition's log line
    // reports ("3 checks failed").
    unsigned streak() const { return std::max(passes_, failures_); }

private:
    bool up_;
    unsigned rise_;
    unsigned fall_;
    unsigned passes_ = 0;
    unsigned failures_ = 0;
};

enum class ReplyVerdict {
    NeedMore, // a prefix of `expect` so far: read on
    Pass,     // the reply starts with `expect`
    Fail,     // a byte differs from `expect`
};

// `received`: the reply's first bytes, at most expect.size() of them. A mismatch fails
// at once, without waiting for the rest or the timeout.
inline ReplyVerdict judge_reply(std::string_view expect, std::string_view received) {
    std::size_t n = std::min(expect.size(), received.size());
    if (expect.substr(0, n) != received.substr(0, n))
        return ReplyVerdict::Fail;
    return n == expect.size() ? ReplyVerdict::Pass : ReplyVerdict::NeedMore;
}

} // namespace uringfwd::engine
