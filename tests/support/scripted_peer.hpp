// The upstream side of a test: a server that runs one ExchangePlan per accepted
// connection (a source, a sink, a duplex peer, a peer that resets mid-transfer) and
// records what each connection saw.
#pragma once

#include "tests/support/connection_server.hpp"
#include "tests/support/exchange.hpp"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <vector>

namespace uringfwd::test {

class ScriptedPeer {
public:
    // Each connection's exchange gives up after `per_connection` (no peer outlives a
    // test by much even if the proxy stalls).
    explicit ScriptedPeer(ExchangePlan plan, Family family = Family::Inet4,
                          milliseconds per_connection = milliseconds{120000});
    // The i-th connection runs plans[i]; later ones repeat the last plan. Lets a test
    // make the first connection misbehave and check the proxy still serves the next.
    explicit ScriptedPeer(std::vector<ExchangePlan> plans, Family family = Family::Inet4,
                          milliseconds per_connection = milliseconds{120000});
    ~ScriptedPeer();
    ScriptedPeer(const ScriptedPeer&) = delete;
    ScriptedPeer& operator=(const ScriptedPeer&) = delete;

    const Endpoint& endpoint() const { return server_->endpoint(); }
    uint64_t accepted() const { return server_->accepted(); }

    // Waits until `count` connections have finished their exchange; returns all results
    // finished so far (fewer than `count` on timeout), in completion order.
    std::vector<ExchangeResult> wait_results(std::size_t count, const Deadline& deadline);
    // The first finished connection's result, or nullopt on timeout.
    std::optional<ExchangeResult> wait_result(const Deadline& deadline);

private:
    void handle(UniqueFd conn, int cancel_fd);

    const std::vector<ExchangePlan> plans_;
    std::atomic<std::size_t> next_plan_{0};
    const milliseconds per_connection_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::vector<ExchangeResult> results_;
    // Last member: destroyed (stopped and joined) first, while the rest still exists.
    std::unique_ptr<ConnectionServer> server_;
};

// Accepts connections and never reads from them, so whatever is sent to it piles up in
// socket buffers: the proxy has to apply backpressure. Holds them until destroyed.
class SilentServer {
public:
    explicit SilentServer(Family family = Family::Inet4);
    const Endpoint& endpoint() const { return server_.endpoint(); }
    uint64_t accepted() const { return server_.accepted(); }

private:
    ConnectionServer server_;
};

} // namespace uringfwd::test
