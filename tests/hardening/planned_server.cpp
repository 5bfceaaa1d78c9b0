#include "tests/hardening/planned_server.hpp"

namespace uringfwd::test {

PlannedServer::PlannedServer(Listener listener, ExchangePlan plan, milliseconds per_connection)
    : plan_(plan), per_connection_(per_connection) {
    server_ = std::make_unique<ConnectionServer>(
        std::move(listener), [this](UniqueFd conn, int cancel_fd) {
            ExchangePlan mine = plan_;
            mine.cancel_fd = cancel_fd;
            ExchangeResult r = exchange(conn, mine, Deadline{per_connection_});
            std::lock_guard lock(mu_);
            results_.push_back(std::move(r));
            cv_.notify_all();
        });
}

PlannedServer::~PlannedServer() {
    server_->stop();
}

std::vector<ExchangeResult> PlannedServer::wait_results(std::size_t count,
                                                        const Deadline& deadline) {
    std::unique_lock lock(mu_);
    cv_.wait_until(lock, deadline.when(), [&] { return results_.size() >= count; });
    return results_;
}

} // namespace uringfwd::test
