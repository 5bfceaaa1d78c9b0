// A point in time every blocking test helper gives up at, so that no test can hang.
#pragma once

#include <algorithm>
#include <chrono>

namespace uringfwd::test {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

class Deadline {
public:
    explicit Deadline(Clock::duration budget) : at_(Clock::now() + budget) {}
    static Deadline at(Clock::time_point when) {
        Deadline d{Clock::duration::zero()};
        d.at_ = when;
        return d;
    }

    Clock::time_point when() const { return at_; }
    bool expired() const { return Clock::now() >= at_; }

    // Milliseconds left, rounded up so that poll() does not spin on a sub-millisecond
    // remainder; 0 once expired. Suitable as a poll() timeout.
    int poll_timeout_ms() const {
        auto left = at_ - Clock::now();
        if (left <= Clock::duration::zero()) {
            return 0;
        }
        auto ms = std::chrono::ceil<milliseconds>(left).count();
        return static_cast<int>(std::min<long long>(ms, 1 << 30));
    }

    // The earlier of two deadlines.
    Deadline min(const Deadline& other) const { return at_ <= other.at_ ? *this : other; }

private:
    Clock::time_point at_;
};

} // namespace uringfwd::test
