// Aborts the whole test process, with a message, if a scope does not finish in time.
// For the few calls that cannot take a deadline themselves (Engine::wait()): a hung
// suite is worse than a crashed one, because the crash names the culprit.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace uringfwd::test {

class Watchdog {
public:
    Watchdog(std::chrono::milliseconds limit, std::string what);
    ~Watchdog(); // disarms and joins
    Watchdog(const Watchdog&) = delete;
    Watchdog& operator=(const Watchdog&) = delete;

private:
    std::mutex mu_;
    std::condition_variable cv_;
    bool disarmed_ = false;
    std::thread thread_;
};

} // namespace uringfwd::test
