// HealthChecker's face to the rest of the engine: start and stop its thread, and the
// verdicts and counts the shards and Engine::member_health() read. The checks
// themselves run in health_loop.cpp.
#include "health/health_checker.hpp"

#include "health/health_loop.hpp"

#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

namespace uringfwd::engine {

using namespace health_detail;

HealthChecker::HealthChecker(std::vector<HealthTarget> targets, Logger log, OnChange on_change)
    : targets_(std::move(targets)), log_(std::move(log)), on_change_(std::move(on_change)),
      published_(std::make_unique<Published[]>(targets_.size())) {
    for (std::size_t i = 0; i < targets_.size(); ++i) {
        published_[i].up.store(targets_[i].initially_up, std::memory_order_relaxed);
        published_[i].paused.store(targets_[i].initially_paused, std::memory_order_relaxed);
    }
}

HealthChecker::~HealthChecker() {
    stop();
}

void HealthChecker::start() {
    std::lock_guard lock(lifecycle_mu_);
    if (started_)
        throw std::logic_error("HealthChecker::start() called twice");
    started_ = true;
    wake_fd_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!wake_fd_)
        throw std::runtime_error(fmt::format("health checks: eventfd: {}", std::strerror(errno)));
    std::promise<void> ready;
    std::future<void> set_up = ready.get_future();
    thread_ = std::thread([this, &ready] { run(ready); });
    try {
        set_up.get();
    } catch (...) {
        thread_.join();
        throw;
    }
}

void HealthChecker::run(std::promise<void>& ready) {
    // Shows in top -H and /proc/PID/task/*/comm.
    pthread_setname_np(pthread_self(), "fwd-health");
    std::unique_ptr<Loop> loop;
    try {
        loop = std::make_unique<Loop>(*this);
    } catch (...) {
        ready.set_exception(std::current_exception());
        return;
    }
    ready.set_value(); // `ready` is gone once start() returns: not touched again
    loop->run();
}

void HealthChecker::stop() {
    std::lock_guard lock(lifecycle_mu_);
    if (!thread_.joinable())
        return;
    uint64_t one = 1;
    // Cannot fail in a way worth handling: the counter only saturates after 2^64 - 1.
    [[maybe_unused]] ssize_t n = ::write(wake_fd_.get(), &one, sizeof(one));
    thread_.join();
}

HealthChecker::TargetStats HealthChecker::stats(std::size_t target) const {
    const Published& p = published_[target];
    return TargetStats{
        .up = p.up.load(std::memory_order_acquire), // see finish_check()
        .checks = p.checks.load(std::memory_order_relaxed),
        .failures = p.failures.load(std::memory_order_relaxed),
        .transitions = p.transitions.load(std::memory_order_relaxed),
    };
}

} // namespace uringfwd::engine
