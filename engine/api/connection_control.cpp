// Runtime control of open connections (Engine::connections(), close_connection(),
// close_connections()): each shard is asked on its own thread, through its mailbox.
#include "api/engine_impl.hpp"

#include "support/plural.hpp"

#include <fmt/format.h>

namespace uringfwd {

std::vector<OpenConnection> Engine::Impl::connections(const ConnectionFilter& filter) const {
    ConnectionFilter by_key = filter;
    if (!filter.route.empty() && !filter.member.empty()) {
        // An address names the member as it does for set_member_state().
        std::lock_guard lock(plan_mu_);
        MemberPlace place = find_member(filter.route, filter.member);
        if (!place.error.empty())
            return {};
        by_key.member = routes_->routes[place.route].members[place.member].name;
    }
    std::vector<OpenConnection> out;
    if (!on_every_shard([&](engine::Shard& s) { s.add_connections(out, by_key, by_key.limit); }))
        return {};
    return out;
}

ChangeResult Engine::Impl::close_connection(uint64_t id) {
    // The shard that opened it is in the id's top 16 bits (Connections::open()): it is
    // there unless it moved since (Engine::move_connection), so that one is asked first.
    const std::size_t home = id >> 48;
    bool closed = false;
    for (std::size_t i = 0; i < shards_.size() && !closed; ++i) {
        engine::Shard* s = shards_[(home + i) % shards_.size()].get();
        if (!s->call([s, id, &closed] { closed = s->close_connection(id); }))
            return {false, "the engine has stopped"};
    }
    if (!closed)
        return {false, fmt::format("no open connection {}", id)};
    return {true, {}};
}

std::size_t Engine::Impl::close_connections(std::string_view route, std::string_view member) {
    if (route.empty())
        return 0; // never every route's at once by a slip
    std::string key;
    if (!member.empty()) {
        // An address names the member as it does for set_member_state().
        std::lock_guard lock(plan_mu_);
        MemberPlace place = find_member(route, member);
        if (!place.error.empty())
            return 0;
        key = routes_->routes[place.route].members[place.member].name;
    }
    std::size_t closed = 0;
    on_every_shard([&](engine::Shard& s) { closed += s.close_connections(route, key); });
    if (closed > 0)
        log_.info("route \"{}\"{}: {} reset by the operator", route,
                  key.empty() ? std::string() : fmt::format(" member {}", key),
                  engine::count_of(closed, "connection"));
    return closed;
}

} // namespace uringfwd
