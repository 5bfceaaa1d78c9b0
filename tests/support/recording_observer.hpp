// A ConnectionObserver that keeps what it is told, for tests that check the records of
// opened and closed connections from their own thread.
#pragma once

#include "uringfwd/observer.hpp"

#include <cstddef>
#include <mutex>
#include <vector>

namespace uringfwd::test {

class RecordingObserver : public ConnectionObserver {
public:
    void on_open(const ConnectionInfo& info) override {
        std::lock_guard lock(mu_);
        opened_.push_back(info);
        opened_.back().route = {}; // only valid during the call
    }
    void on_close(const ConnectionRecord& record) override {
        std::lock_guard lock(mu_);
        closed_.push_back(record);
        closed_.back().info.route = {};
    }
    std::vector<ConnectionRecord> closed() const {
        std::lock_guard lock(mu_);
        return closed_;
    }
    std::size_t opened() const {
        std::lock_guard lock(mu_);
        return opened_.size();
    }
    // What on_open was told, in order (route cleared).
    std::vector<ConnectionInfo> opened_connections() const {
        std::lock_guard lock(mu_);
        return opened_;
    }

private:
    mutable std::mutex mu_;
    std::vector<ConnectionInfo> opened_;
    std::vector<ConnectionRecord> closed_;
};

} // namespace uringfwd::test
