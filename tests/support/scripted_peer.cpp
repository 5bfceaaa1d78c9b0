#include "tests/support/scripted_peer.hpp"

#include <poll.h>

#include <algorithm>

namespace uringfwd::test {

ScriptedPeer::ScriptedPeer(ExchangePlan plan, Family family, milliseconds per_connection)
    : ScriptedPeer(std::vector<ExchangePlan>{std::move(plan)}, family, per_connection) {}

ScriptedPeer::ScriptedPeer(std::vector<ExchangePlan> plans, Family family,
                           milliseconds per_connection)
    : plans_(std::move(plans)), per_connection_(per_connection),
      server_(std::make_unique<ConnectionServer>(
          listen_loopback(family),
          [this](UniqueFd conn, int cancel_fd) { handle(std::move(conn), cancel_fd); })) {}

ScriptedPeer::~ScriptedPeer() {
    server_.reset();
}

void ScriptedPeer::handle(UniqueFd conn, int cancel_fd) {
    const std::size_t i = next_plan_.fetch_add(1);
    ExchangePlan plan = plans_.at(std::min(i, plans_.size() - 1));
    plan.cancel_fd = cancel_fd;
    ExchangeResult result = exchange(conn, plan, Deadline{per_connection_});
    std::lock_guard lock(mu_);
    results_.push_back(std::move(result));
    cv_.notify_all();
}

std::vector<ExchangeResult> ScriptedPeer::wait_results(std::size_t count,
                                                       const Deadline& deadline) {
    std::unique_lock lock(mu_);
    cv_.wait_until(lock, deadline.when(), [&] { return results_.size() >= count; });
    return results_;
}

std::optional<ExchangeResult> ScriptedPeer::wait_result(const Deadline& deadline) {
    auto results = wait_results(1, deadline);
    if (results.empty()) {
        return std::nullopt;
    }
    return results.front();
}

SilentServer::SilentServer(Family family)
    : server_(listen_loopback(family), [](UniqueFd conn, int cancel_fd) {
          // Hold the connection, unread, until the server stops.
          pollfd pfd{cancel_fd, POLLIN, 0};
          while (::poll(&pfd, 1, -1) <= 0) {
          }
          conn.reset();
      }) {}

} // namespace uringfwd::test
