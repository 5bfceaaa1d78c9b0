#include "routing/passive_health.hpp"

#include <algorithm>
#include <limits>

namespace uringfwd::engine {

namespace {

// A max_backoff below the first backoff would shorten the doubled ones below the first:
// the first backoff is the floor of the cap.
PassiveHealthState::Clock::duration cap_of(const PassiveHealth& cfg) {
    return std::max<PassiveHealthState::Clock::duration>(cfg.backoff, cfg.max_backoff);
}

} // namespace

bool PassiveHealthState::failed(const PassiveHealth& cfg, Clock::time_point now) {
    if (cfg.fall == 0)
        return false;
    if (failures_ < std::numeric_limits<unsigned>::max())
        ++failures_;
    if (!marked_down_) {
        if (failures_ < cfg.fall)
            return false;
        marked_down_ = true;
        backoff_ = cfg.backoff;
        down_until_ = now + backoff_;
        return true;
    }
    if (now < down_until_)
        return false; // began before the member was marked: no news
    backoff_ = std::min<Clock::duration>(backoff_ * 2, cap_of(cfg));
    down_until_ = now + backoff_;
    return false;
}

bool PassiveHealthState::succeeded() {
    const bool was_down = marked_down_;
    failures_ = 0;
    marked_down_ = false;
    down_until_ = {};
    backoff_ = Clock::duration{0};
    return was_down;
}

} // namespace uringfwd::engine
