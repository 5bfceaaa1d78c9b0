#include "routing/name_refresher.hpp"

#include <arpa/inet.h>
#include <pthread.h>

#include <algorithm>
#include <cstring>

namespace uringfwd::engine {

bool is_host_name(const Endpoint& address) {
    if (address.kind != Endpoint::Kind::Inet || address.host.empty())
        return false;
    in_addr literal{};
    return ::inet_pton(AF_INET, address.host.c_str(), &literal) != 1;
}

NameRefresher::NameRefresher(std::function<void()> changed, Logger log)
    : changed_(std::move(changed)), log_(std::move(log)) {}

NameRefresher::~NameRefresher() {
    stop();
}

std::chrono::milliseconds NameRefresher::interval_of(const RouteTable& table) {
    std::chrono::milliseconds shortest{0};
    for (const Route& route : table.routes) {
        auto every = route.pool.resolve_interval;
        bool named = std::any_of(route.pool.members.begin(), route.pool.members.end(),
                                 [](const UpstreamMember& m) { return is_host_name(m.address); });
        if (named && every.count() > 0)
            shortest = shortest.count() == 0 ? every : std::min(shortest, every);
    }
    return shortest;
}

void NameRefresher::follow(std::shared_ptr<const RouteTable> table) {
    std::lock_guard lock(mu_);
    table_ = std::move(table);
    if (!thread_.joinable() && !stopping_ && interval_of(*table_).count() > 0)
        thread_ = std::thread([this] { loop(); });
    wake_.notify_all();
}

void NameRefresher::stop() {
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable())
        thread_.join();
}

void NameRefresher::loop() {
    pthread_setname_np(pthread_self(), "fwd-resolve");
    std::unique_lock lock(mu_);
    while (!stopping_) {
        std::chrono::milliseconds every = interval_of(*table_);
        if (every.count() == 0) {
            wake_.wait(lock);
            continue;
        }
        if (wake_.wait_for(lock, every) == std::cv_status::no_timeout)
            continue; // stopped, or new routes: start the interval over
        std::shared_ptr<const RouteTable> table = table_;
        lock.unlock(); // lookups block; follow() and stop() must not wait for them
        bool changed = differs(*table);
        if (changed)
            changed_(); // reconfigures, which calls follow() with the new routes
        lock.lock();
    }
}

// Runs unlocked on the refresher's thread; failing_ is touched only here.
bool NameRefresher::differs(const RouteTable& table) {
    bool changed = false;
    for (const Route& route : table.routes) {
        if (route.pool.resolve_interval.count() <= 0)
            continue;
        for (std::size_t m = 0; m < route.pool.members.size(); ++m) {
            const Endpoint& name = route.pool.members[m].address;
            if (!is_host_name(name))
                continue;
            SocketAddress now;
            try {
                now = resolve_upstream(name);
            } catch (const std::exception& e) {
                if (failing_.insert(name.host).second)
                    log_.warn("route \"{}\": {}; keeping the last answer", route.name, e.what());
                continue;
            }
            if (failing_.erase(name.host) > 0)
                log_.info("route \"{}\": {} resolves again", route.name, name.host);
            const SocketAddress& used = route.members[m].address;
            if (now.length != used.length || std::memcmp(&now.storage, &used.storage, now.length))
                changed = true;
        }
    }
    if (changed)
        log_.info("upstream host names now resolve to other addresses: updating the pools");
    return changed;
}

} // namespace uringfwd::engine
