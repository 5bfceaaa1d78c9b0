// A socket the engine has taken but serves no connection on yet: a client waiting for
// room at its route's limit, a hand-over not yet taken, the application's upstream of
// a forward_pair. It owns the socket, and one dropped unserved (a route dropped while
// clients wait, a shard that stops) is cut before its stream began: its peer sees a
// reset, not an orderly end. A plain fd is closed with SO_LINGER {1, 0}
// (set_reset_on_close()); a slot of the shard's registered file table has no fd and can
// only be closed through the ring, so it carries the shard's SlotCloser. Served, it is
// moved into its connection's ConnSocket (serve_into()), which closes it from then on.
#pragma once

#include "net/sockets.hpp"
#include "shard/connection/conn_socket.hpp"
#include "shard/loop/op_tag.hpp"
#include "shard/loop/shard_counters.hpp"
#include "shard/loop/shard_io.hpp"
#include "uring/file_ref.hpp"
#include "uring/unique_fd.hpp"

#include <utility>

namespace uringfwd::engine {

// The shard's ring, to close a slot nobody serves: counted in the shard's own
// operations (Op::ShardCloseFile), reset like a plain fd (ShardIo::close_direct()).
struct SlotCloser {
    ShardIo* io = nullptr;
    InFlight* in_flight = nullptr;

    void close(int slot) const {
        io->close_direct(*in_flight, OpTag::for_shard(Op::ShardCloseFile),
                         uring::FileRef::direct(slot), /*reset=*/true);
        drop(io->counters().direct_slots);
    }
};

class UnservedSocket {
public:
    UnservedSocket() = default;
    static UnservedSocket plain(int fd) {
        UnservedSocket socket;
        socket.fd_.reset(fd);
        return socket;
    }
    // `closer` must outlive the socket (the shard's).
    static UnservedSocket in_slot(int slot, const SlotCloser& closer) {
        UnservedSocket socket;
        socket.slot_ = slot;
        socket.closer_ = &closer;
        return socket;
    }
    ~UnservedSocket() { reset(); }
    UnservedSocket(UnservedSocket&& other) noexcept
        : fd_(std::move(other.fd_)), slot_(std::exchange(other.slot_, -1)),
          closer_(std::exchange(other.closer_, nullptr)) {}
    UnservedSocket& operator=(UnservedSocket&& other) noexcept {
        if (this != &other) {
            reset();
            fd_ = std::move(other.fd_);
            slot_ = std::exchange(other.slot_, -1);
            closer_ = std::exchange(other.closer_, nullptr);
        }
        return *this;
    }
    UnservedSocket(const UnservedSocket&) = delete;
    UnservedSocket& operator=(const UnservedSocket&) = delete;

    bool valid() const { return slot_ >= 0 || fd_.valid(); }
    bool fixed() const { return slot_ >= 0; }
    // The plain fd, or -1 (a slot, or none): for syscalls before it is served.
    int fd() const { return fd_.get(); }

    // Served: `socket` (holding nothing) takes it over; this one holds nothing after.
    void serve_into(ConnSocket& socket) {
        if (slot_ >= 0) {
            socket.set_slot(std::exchange(slot_, -1));
            closer_ = nullptr;
        } else {
            socket.reset_plain(fd_.release());
        }
    }
    // A plain fd given back unclosed to whoever handed it over (the engine refused it).
    int release_fd() { return fd_.release(); }

    // Drops it now: the peer is reset (see above).
    void reset() {
        if (fd_.valid()) {
            set_reset_on_close(fd_.get());
            fd_.reset();
        }
        if (slot_ >= 0)
            closer_->close(std::exchange(slot_, -1));
        closer_ = nullptr;
    }

private:
    uring::UniqueFd fd_;
    int slot_ = -1;
    const SlotCloser* closer_ = nullptr;
};

} // namespace uringfwd::engine
