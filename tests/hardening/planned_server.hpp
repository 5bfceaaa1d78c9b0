// An upstream peer on a listener the test made itself (for example inside a network
// namespace, where ScriptedPeer's loopback listener cannot be reached): every
// connection runs one ExchangePlan and its result is kept for the test to check.
#pragma once

#include "tests/support/connection_server.hpp"
#include "tests/support/exchange.hpp"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

namespace uringfwd::test {

class PlannedServer {
public:
    PlannedServer(Listener listener, ExchangePlan plan,
                  milliseconds per_connection = milliseconds{120000});
    ~PlannedServer();
    PlannedServer(const PlannedServer&) = delete;
    PlannedServer& operator=(const PlannedServer&) = delete;

    const Endpoint& endpoint() const { return server_->endpoint(); }
    uint64_t accepted() const { return server_->accepted(); }

    // Results of finished connections once `count` have finished or the deadline passed.
    std::vector<ExchangeResult> wait_results(std::size_t count, const Deadline& deadline);

private:
    const ExchangePlan plan_;
    const milliseconds per_connection_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::vector<ExchangeResult> results_;
    // Last: stopped and joined first, while the members its handlers use still exist.
    std::unique_ptr<ConnectionServer> server_;
};

} // namespace uringfwd::test
