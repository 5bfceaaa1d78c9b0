#include "tests/support/watchdog.hpp"

#include <cstdio>
#include <cstdlib>

namespace uringfwd::test {

Watchdog::Watchdog(std::chrono::milliseconds limit, std::string what) {
    thread_ = std::thread([this, limit, what = std::move(what)] {
        std::unique_lock lock(mu_);
        if (!cv_.wait_for(lock, limit, [this] { return disarmed_; })) {
            std::fprintf(stderr, "watchdog: %s did not finish within %lld ms, aborting\n",
                         what.c_str(), static_cast<long long>(limit.count()));
            std::abort();
        }
    });
}

Watchdog::~Watchdog() {
    {
        std::lock_guard lock(mu_);
        disarmed_ = true;
    }
    cv_.notify_all();
    thread_.join();
}

} // namespace uringfwd::test
