// An upgrade's connection hand-over, the engine's half (docs/handover.md): the shards
// detach their quiet connections into detached_ (Connections::set_handover), the
// caller takes them and passes them on; the engine that receives them adopts each into
// the shard of the CPU the client's packets arrive on, which carries it on where the
// other one stopped.
#include "api/engine_impl.hpp"

#include <sys/socket.h>
#include <unistd.h>

namespace uringfwd {

void DetachedConnection::close_fds() {
    for (int* fd : {&client_, &upstream_, &unsent_[0].read_fd, &unsent_[0].write_fd,
                    &unsent_[1].read_fd, &unsent_[1].write_fd}) {
        if (*fd >= 0)
            ::close(*fd);
        *fd = -1;
    }
}

void DetachedConnection::hold_unsent(Toward toward, UnsentPipe pipe) {
    UnsentPipe& mine = unsent_[static_cast<int>(toward)];
    for (int fd : {mine.read_fd, mine.write_fd})
        if (fd >= 0)
            ::close(fd);
    mine = pipe;
}

void Engine::Impl::set_handover(bool on, UnsentBytes unsent) {
    for (const auto& shard : shards_) {
        engine::Shard* s = shard.get();
        (void)s->call([s, on, unsent] { s->set_handover(on, unsent); });
    }
}

HandoverEnd Engine::Impl::end_handover() {
    // Each shard stops detaching; but one that has detached all it had must not end
    // yet (a stopping shard ends once it holds none): the connections still in the
    // queue come back to the shards now, and each shard is held open until they are in.
    // The adoptions are posted before the release, and a shard's mailbox runs in order.
    for (const auto& shard : shards_) {
        engine::Shard* s = shard.get();
        (void)s->call([s] {
            s->hold_open(true);
            s->set_handover(false, UnsentBytes::StayHere);
        });
    }
    HandoverEnd end;
    for (DetachedConnection& conn : detached_->take(SIZE_MAX, std::chrono::milliseconds{0})) {
        if (adopt(std::move(conn)))
            ++end.lost; // closed with `conn`
        else
            ++end.carried_on;
    }
    for (const auto& shard : shards_) {
        engine::Shard* s = shard.get();
        (void)s->call([s] { s->hold_open(false); });
    }
    return end;
}

std::vector<DetachedConnection> Engine::Impl::take_detached(std::size_t max,
                                                            std::chrono::milliseconds wait) {
    std::vector<DetachedConnection> out = detached_->take(max, wait);
    // A shard stops pausing while the queue is full, and an idle one has no completion
    // to wake it when room is made: wake each to look again (a batch of its loop).
    if (!out.empty())
        for (const auto& shard : shards_)
            (void)shard->post([] {});
    return out;
}

std::size_t Engine::Impl::open_connections() const {
    std::size_t open = 0;
    for (const auto& shard : shards_)
        open += shard->counters().active.load(std::memory_order_acquire);
    return open;
}

std::error_code Engine::Impl::adopt(DetachedConnection&& conn) {
    if (conn.client_fd() < 0 || conn.upstream_fd() < 0)
        return std::make_error_code(std::errc::bad_file_descriptor);
    if (!serves_route(conn.route))
        return std::make_error_code(std::errc::invalid_argument);
    // The shard of the CPU the client's packets are processed on (what steering would
    // have chosen for it, SO_INCOMING_CPU), else the one with fewest open. The sockets
    // are non-blocking and have TCP_NODELAY already: those are flags of the open file
    // and the socket, which SCM_RIGHTS passes as they are.
    int cpu = -1;
    socklen_t len = sizeof(cpu);
    if (::getsockopt(conn.client_fd(), SOL_SOCKET, SO_INCOMING_CPU, &cpu, &len) != 0)
        cpu = -1;
    engine::Handoff handoff{
        .client = engine::UnservedSocket::plain(conn.client_fd()),
        .upstream = engine::UnservedSocket::plain(conn.upstream_fd()),
        .route = conn.route,
        .resumed = engine::resumed_from(conn), // its pipes, if any, are the hand-off's now
    };
    const std::error_code error = deliver(handoff, cpu);
    if (!error) {
        conn.release_fds(); // the shard's now
        return error;
    }
    for (Toward toward : {Toward::Upstream, Toward::Client}) // `conn` keeps its pipes too
        if (std::optional<pipes::Pipe>& pipe = handoff.resumed->unsent[static_cast<int>(toward)]) {
            const std::size_t bytes = pipe->bytes();
            const pipes::Pipe::Ends ends = pipe->release();
            conn.hold_unsent(toward, {ends.read_fd, ends.write_fd, bytes});
        }
    return error;
}

void Engine::begin_handover(UnsentBytes unsent) {
    impl_->set_handover(true, unsent);
}
HandoverEnd Engine::end_handover() {
    return impl_->end_handover();
}
std::vector<DetachedConnection> Engine::take_detached(std::size_t max,
                                                      std::chrono::milliseconds wait) {
    return impl_->take_detached(max, wait);
}
std::error_code Engine::adopt(DetachedConnection&& conn) {
    return impl_->adopt(std::move(conn));
}
std::size_t Engine::open_connections() const {
    return impl_->open_connections();
}

} // namespace uringfwd
