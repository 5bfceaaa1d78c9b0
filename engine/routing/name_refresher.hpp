// Follows the host names of upstream members: every route's resolve_interval, on a
// thread of its own (getaddrinfo blocks, so never on a shard), it looks each name up
// again and calls `changed` when an answer differs from the routes in use. A failed
// lookup keeps the last answer and is logged once, until the name resolves again.
#pragma once

#include "routing/route_table.hpp"
#include "support/logger.hpp"

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

namespace uringfwd::engine {

class NameRefresher {
public:
    NameRefresher(std::function<void()> changed, Logger log);
    ~NameRefresher(); // stop()
    NameRefresher(const NameRefresher&) = delete;
    NameRefresher& operator=(const NameRefresher&) = delete;

    // The routes in use (at start and after each reconfiguration). Starts the thread
    // the first time a route has names to follow.
    void follow(std::shared_ptr<const RouteTable> table);
    void stop();

private:
    void loop();
    // The shortest resolve_interval of a route with a host name; 0: nothing to follow.
    static std::chrono::milliseconds interval_of(const RouteTable& table);
    bool differs(const RouteTable& table);

    std::function<void()> changed_;
    Logger log_;
    std::mutex mu_;
    std::condition_variable wake_;
    std::shared_ptr<const RouteTable> table_;
    std::set<std::string> failing_; // names whose last lookup failed (logged once)
    bool stopping_ = false;
    std::thread thread_;
};

// Whether `address` names a host to look up (not an address literal or a Unix path).
bool is_host_name(const Endpoint& address);

} // namespace uringfwd::engine
