// A shard's socket budget: clients accepted only while there is room for them and
// their upstream socket, so that none is taken only to be reset when its upstream
// socket cannot be had (issue 20). Two budgets, in connections of two sockets each:
// the connections on plain fds the fd limit leaves room for (platform/fd_room.hpp),
// shared by every shard as they share the process's fd table; and the connections the
// shard's registered file table holds (direct descriptors, docs/kernel.md §11), its
// own. A client takes its units when accepted or handed over and gives them back once
// its connection has closed; while a budget is all taken, the listeners whose clients
// would take more hold off and clients wait in the listen backlog, as at a route's
// max_connections.
#include "platform/fd_room.hpp"
#include "shard/shard.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <fstream>

namespace uringfwd::engine {

namespace {

// What a multishot accept may take at once: the whole accept queue,
// min(backlog, net.core.somaxconn) (net/socket.c __sys_listen).
std::size_t accept_queue_limit() {
    std::size_t somaxconn = 4096;
    std::ifstream in("/proc/sys/net/core/somaxconn");
    in >> somaxconn;
    return std::min<std::size_t>(somaxconn, 4096);
}

} // namespace

void Shard::plan_budget() {
    std::size_t direct = 0;
    std::size_t plain = 0;
    for (const auto& listener : listeners_) {
        if (listener->stopped())
            continue;
        ++(listener->direct() ? direct : plain);
    }
    // A client in a slot takes two (its upstream's too); one accept per direct listener
    // may be in flight when the table fills.
    slot_room_ = direct_ ? engine::slot_room(io_->ring().file_table_slots(), direct) : 0;
    // Every shard's plain listeners may each take a full queue before they are
    // stopped: with less room than that left, each client is accepted only once its
    // unit is had.
    one_at_a_time_below_ = plain * setup_.shards * accept_queue_limit();
    // Listeners added by a reload hold as the others do.
    for (auto& listener : listeners_) {
        if (fds_held_ && !listener->direct())
            listener->hold(kFdsFull);
        if (slots_held_)
            listener->hold(kSlotsFull);
    }
    update_accept_modes();
}

SocketUnits Shard::take_units(bool plain_fd, bool slot, bool fd_unit_taken) {
    SocketUnits units;
    if (fd_unit_taken) {
        units.fd = true;
    } else if (plain_fd && fd_connections_->limit() != 0) {
        fd_connections_->take(); // accepted already: counted whatever the room
        units.fd = true;
    }
    if (slot && direct_) {
        ++slots_taken_;
        units.slot = true;
    }
    check_budget();
    return units;
}

void Shard::give_units(SocketUnits units) {
    if (units.fd)
        setup_.doorbells->give_back(*fd_connections_, static_cast<std::size_t>(setup_.index));
    if (units.slot && slots_taken_ > 0)
        --slots_taken_;
    if (units.fd || units.slot)
        resume_budget();
}

void Shard::check_budget() {
    if (!fds_held_ && fd_connections_->full()) {
        fds_held_ = true;
        for (auto& listener : listeners_)
            if (!listener->direct())
                listener->hold(kFdsFull);
        if (budget_log_.allow(LogThrottle::Clock::now())) {
            rlimit lim{};
            ::getrlimit(RLIMIT_NOFILE, &lim);
            log_.warn("{} connections on plain fds, all the fd limit leaves room for "
                      "(RLIMIT_NOFILE {}, two fds each beside pipes and the engine's own); "
                      "new clients wait in the listen backlog{}",
                      fd_connections_->used(), static_cast<unsigned long long>(lim.rlim_cur),
                      suppressed_note(budget_log_.suppressed()));
        }
    }
    if (!slots_held_ && slot_room_ != 0 && slots_taken_ >= slot_room_) {
        slots_held_ = true;
        // Every client of a shard with direct descriptors takes slots (a plain one
        // for its upstream): every listener holds.
        for (auto& listener : listeners_)
            listener->hold(kSlotsFull);
        if (budget_log_.allow(LogThrottle::Clock::now()))
            log_.warn("{} connections in the shard's registered file table, all its {} slots "
                      "leave room for ([engine] direct_table_size, the fd limit); new clients "
                      "wait in the listen backlog{}",
                      slots_taken_, io_->ring().file_table_slots(),
                      suppressed_note(budget_log_.suppressed()));
    }
    if (fds_held_)
        resume_budget(); // registers for the room given back by other shards
    else
        update_accept_modes();
}

void Shard::resume_budget() {
    if (stopping_)
        return;
    while (fds_held_) {
        if (!fd_connections_->full()) {
            fds_held_ = false;
            if (wanting_fds_)
                fd_connections_->unwant(static_cast<std::size_t>(setup_.index));
            wanting_fds_ = false;
            for (auto& listener : listeners_)
                if (!listener->direct())
                    listener->release_hold(kFdsFull);
            break;
        }
        // Registered before this look: whoever gives room back rings this shard. Only
        // now: look once more (routing/shared_limit.hpp).
        if (wanting_fds_)
            break;
        fd_connections_->want(static_cast<std::size_t>(setup_.index));
        wanting_fds_ = true;
    }
    if (slots_held_ && slots_taken_ < slot_room_) {
        slots_held_ = false;
        for (auto& listener : listeners_)
            listener->release_hold(kSlotsFull);
    }
    update_accept_modes();
}

void Shard::update_accept_modes() {
    const std::size_t limit = fd_connections_->limit();
    const std::size_t used = fd_connections_->used();
    const std::size_t left = used < limit ? limit - used : 0;
    const std::size_t below = one_at_a_time_below_;
    // Back to the multishot accept only well above the threshold, so that a shard near
    // it does not switch at every connection: twice it, or halfway to the whole room
    // when that is less (a room below twice the threshold would never get back).
    const std::size_t back = limit > below ? std::min(2 * below, below + (limit - below) / 2) : 0;
    for (auto& listener : listeners_) {
        if (listener->direct() || listener->stopped())
            continue;
        if (left < below)
            listener->set_one_at_a_time(true);
        else if (left >= back)
            listener->set_one_at_a_time(false);
    }
}

void Shard::accept_waiting(Listener& listener) {
    // A few per wake-up: each needs its unit first, so none is accepted without room.
    constexpr int kBatch = 16;
    for (int i = 0; i < kBatch && listener.may_accept(); ++i) {
        SharedLimit::Taken taken = fd_connections_->try_take();
        if (taken == SharedLimit::Taken::No) {
            check_budget(); // holds the plain listeners
            return;
        }
        const bool counted = taken == SharedLimit::Taken::Counted;
        int fd = listener.accept_now(connections_->active());
        if (fd < 0) {
            // None waits (another shard's accept took it), or no fd could be had.
            if (counted)
                setup_.doorbells->give_back(*fd_connections_,
                                            static_cast<std::size_t>(setup_.index));
            return;
        }
        open_connection(listener, fd, counted);
    }
}

} // namespace uringfwd::engine
