// A thread that runs one task every `interval` until it is stopped (the engine's
// automatic rebalancing, [engine] rebalance_above): the wait is on a condition
// variable, so stop() ends it at once rather than after the next interval.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace uringfwd::engine {

class PeriodicThread {
public:
    PeriodicThread(std::chrono::milliseconds interval, std::function<void()> task)
        : interval_(interval), task_(std::move(task)), thread_([this] { loop(); }) {}
    ~PeriodicThread() {
        stop();
        join();
    }
    PeriodicThread(const PeriodicThread&) = delete;
    PeriodicThread& operator=(const PeriodicThread&) = delete;

    // Waits for the thread to end (after stop()); from one thread at a time.
    void join() {
        if (thread_.joinable())
            thread_.join();
    }

    // Thread-safe; returns at once (join() or the destructor waits).
    void stop() {
        {
            std::lock_guard lock(mu_);
            stopped_ = true;
        }
        wake_.notify_all();
    }

private:
    void loop() {
        std::unique_lock lock(mu_);
        while (!wake_.wait_for(lock, interval_, [this] { return stopped_; })) {
            lock.unlock();
            task_();
            lock.lock();
        }
    }

    const std::chrono::milliseconds interval_;
    const std::function<void()> task_;
    std::mutex mu_;
    std::condition_variable wake_;
    bool stopped_ = false;
    std::thread thread_; // last: it starts once the rest exists
};

} // namespace uringfwd::engine
