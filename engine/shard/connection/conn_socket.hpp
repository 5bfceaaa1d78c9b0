// One socket of a connection: a plain fd it owns, or a slot of the shard's registered
// file table (direct descriptor). A plain fd closes with the socket object; a slot can
// only be closed through the ring (Connections::close_slots()), so it must be gone
// before the object is reset. A slot may also get a plain fd of its own, installed by
// the ring (IORING_OP_FIXED_FD_INSTALL) for the syscalls the ring cannot make for it
// (inline splices, docs/kernel.md §1.9); it closes with the object, and the socket
// itself goes when both it and the slot are closed.
#pragma once

#include "uring/file_ref.hpp"
#include "uring/unique_fd.hpp"

#include <cassert>
#include <utility>

namespace uringfwd::engine {

class ConnSocket {
public:
    void reset_plain(int fd = -1) {
        assert(slot_ < 0);
        plain_.reset(fd);
    }
    void set_slot(int slot) {
        plain_.reset();
        slot_ = slot;
    }
    // The slot, which the caller now closes; -1 for none.
    int release_slot() { return std::exchange(slot_, -1); }
    // Closes a plain fd (and an installed one); a slot must have been released first.
    void reset() {
        reset_plain();
        installed_.reset();
    }

    // The fd that stands for the socket, taken out for another process (a hand-over):
    // the plain one, or the one installed for the slot (which the caller then closes).
    int take_fd() { return slot_ >= 0 ? installed_.release() : plain_.release(); }

    // The plain fd installed for the slot (see above); taken over.
    void set_installed(int fd) { installed_.reset(fd); }
    bool installing = false; // an install of a plain fd for the slot is in flight
    bool install_failed = false;
    // An fd for syscalls on this socket: the plain one, or the one installed for its
    // slot; -1 when there is none (yet).
    int syscall_fd() const { return slot_ >= 0 ? installed_.get() : plain_.get(); }

    bool valid() const { return slot_ >= 0 || plain_.valid(); }
    bool fixed() const { return slot_ >= 0; }
    // The plain fd, or -1 for a slot: only for syscalls outside the ring.
    int fd() const { return plain_.get(); }
    uring::FileRef ref() const {
        return slot_ >= 0 ? uring::FileRef::direct(slot_) : uring::FileRef::plain(plain_.get());
    }

private:
    uring::UniqueFd plain_;
    uring::UniqueFd installed_;
    int slot_ = -1;
};

} // namespace uringfwd::engine
