// Connections the shards detached for an upgrade's hand-over (docs/handover.md), on their
// way to the thread that passes them to the successor: any shard pushes, one thread takes.
#pragma once

#include "uringfwd/handover.hpp"

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <vector>

namespace uringfwd::engine {

class DetachedQueue {
public:
    void push(DetachedConnection&& conn) {
        {
            std::lock_guard lock(mu_);
            fds_ += conn.fd_count();
            queue_.push_back(std::move(conn));
        }
        ready_.notify_one();
    }

    // Up to `max` of them, waiting up to `wait` for the first.
    std::vector<DetachedConnection> take(std::size_t max, std::chrono::milliseconds wait) {
        std::unique_lock lock(mu_);
        ready_.wait_for(lock, wait, [this] { return !queue_.empty(); });
        std::vector<DetachedConnection> out;
        while (!queue_.empty() && out.size() < max) {
            fds_ -= queue_.front().fd_count();
            out.push_back(std::move(queue_.front()));
            queue_.pop_front();
        }
        return out;
    }

    // The fds the queued connections hold: two sockets each, two more per pipe that
    // goes along. What bounds the queue, as it is what the fd limit did not count on.
    std::size_t fds() const {
        std::lock_guard lock(mu_);
        return fds_;
    }

private:
    mutable std::mutex mu_;
    std::condition_variable ready_;
    std::deque<DetachedConnection> queue_;
    std::size_t fds_ = 0;
};

} // namespace uringfwd::engine
