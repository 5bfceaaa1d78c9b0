// Passive health of one member, judged from the connects a shard makes anyway: `fall`
// failures in a row mark it down for a backoff, after which it is tried again; a trial
// that fails doubles the backoff (up to max_backoff), and any successful connect marks
// it up. Pure: the caller passes the time.
#pragma once

#include "uringfwd/route.hpp"

#include <chrono>

namespace uringfwd::engine {

class PassiveHealthState {
public:
    using Clock = std::chrono::steady_clock;

    // A connect to the member failed at `now`. Returns true when this marks the member
    // down (it was up): the one moment to log it. While marked down:
    //  - a failure before down_until() is a connect that began before the member was
    //    marked (many may be in flight): it says nothing new and changes nothing;
    //  - a failure after down_until() is a failed trial: down again for twice the last
    //    backoff (at most max_backoff); still down, so it returns false.
    // With cfg.fall == 0 passive health is off: nothing changes, returns false.
    bool failed(const PassiveHealth& cfg, Clock::time_point now);

    // A connect to the member succeeded: failures forgotten, backoff back to its first
    // value. Returns true when the member was marked down (it is up again).
    bool succeeded();

    // Whether the member must not be chosen at `now`: marked down and the backoff not yet
    // over. Once it is over the member is chosen again (a trial) though still marked.
    bool down(Clock::time_point now) const { return marked_down_ && now < down_until_; }

    // Marked down since `fall` failures and not yet seen to connect (includes trials).
    bool marked_down() const { return marked_down_; }
    unsigned failures() const { return failures_; } // in a row
    Clock::time_point down_until() const { return down_until_; }
    Clock::duration backoff() const { return backoff_; } // the last one applied

private:
    unsigned failures_ = 0;
    bool marked_down_ = false;
    Clock::time_point down_until_{};
    Clock::duration backoff_{0};
};

} // namespace uringfwd::engine
