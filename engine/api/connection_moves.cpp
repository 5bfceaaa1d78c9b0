// Moves between shards (Engine::move_connection, rebalance; docs/handover.md "Between
// shards"): each asks the shard that holds the connection, on its own thread; the
// shard moves it once it is quiet (shard/shard_moves.cpp).
#include "api/engine_impl.hpp"
#include "api/rebalance_plan.hpp"
#include "support/plural.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

namespace uringfwd {

ChangeResult Engine::Impl::move_connection(uint64_t id, unsigned to,
                                           std::chrono::milliseconds limit) {
    if (to >= shards_.size())
        return {false, fmt::format("no shard {}: the engine has {} (0 to {})", to, shards_.size(),
                                   shards_.size() - 1)};
    // It opened on the shard in the id's top 16 bits (Connections::open()) and is there
    // unless it has moved since: ask that one first, then the others.
    const std::size_t home = id >> 48;
    std::optional<std::string> answer;
    for (std::size_t i = 0; i < shards_.size() && !answer; ++i) {
        const std::size_t s = (home + i) % shards_.size();
        engine::Shard* shard = shards_[s].get();
        if (!shard->call([&] { answer = shard->request_move(id, static_cast<int>(to), limit); }))
            return {false, "the engine has stopped"};
    }
    if (!answer)
        return {false, fmt::format("no open connection {}", id)};
    if (!answer->empty())
        return {false, fmt::format("connection {} cannot move to shard {}: {}", id, to, *answer)};
    return {true, {}};
}

std::size_t Engine::Impl::rebalance() {
    return rebalance_if([](const std::vector<std::size_t>&, std::size_t) { return true; });
}

std::size_t Engine::Impl::rebalance_if(
    const std::function<bool(const std::vector<std::size_t>&, std::size_t)>& worth_it) {
    // Planned on what stays where it is: one asked to move already counts on neither
    // shard (it is the other's soon), so a second look does not move it twice over.
    std::vector<std::size_t> open(shards_.size(), 0);
    std::size_t pending = 0;
    for (std::size_t i = 0; i < shards_.size(); ++i) {
        engine::Shard* shard = shards_[i].get();
        (void)shard->call([&] {
            open[i] = shard->staying();
            pending += shard->leaving();
        });
    }
    const EngineStats totals = stats();
    pending += totals.moved_out - std::min(totals.moved_out, totals.moved_in); // in a mailbox
    if (!worth_it(open, pending))
        return 0;
    std::size_t asked = 0;
    for (const engine::ShardMove& move : engine::plan_rebalance(open)) {
        engine::Shard* from = shards_[move.from].get();
        (void)from->call(
            [&] { asked += from->request_moves(move.count, static_cast<int>(move.to)); });
    }
    if (asked > 0)
        log_.info("rebalance: moving {} between shards", engine::count_of(asked, "connection"));
    return asked;
}

void Engine::Impl::start_rebalancer() {
    const std::size_t above = config_.rebalance_above;
    if (above == 0 || shards_.size() < 2)
        return;
    rebalancer_ = std::make_unique<engine::PeriodicThread>(std::chrono::seconds{1}, [this, above] {
        if (stopping_.load())
            return;
        // Moves still under way (a busy stream may take seconds to rest): the next look.
        (void)rebalance_if([above](const std::vector<std::size_t>& open, std::size_t pending) {
            const auto [least, most] = std::minmax_element(open.begin(), open.end());
            return pending == 0 && *most - *least > above;
        });
    });
}

ChangeResult Engine::move_connection(uint64_t id, unsigned shard,
                                     std::chrono::milliseconds give_up_after) {
    return impl_->move_connection(id, shard, give_up_after);
}
std::size_t Engine::rebalance() {
    return impl_->rebalance();
}

} // namespace uringfwd
