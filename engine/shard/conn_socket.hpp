// One socket of a connection: a plain fd it owns, or a slot of the shard's registered
// file table (direct descriptor). A plain fd closes with the socket object; a slot can
// only be closed through the ring (Connections::close_files()), so it must be gone
// before the object is reset.
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
    // Closes a plain fd; a slot must have been released first.
    void reset() { reset_plain(); }

    bool valid() const { return slot_ >= 0 || plain_.valid(); }
    bool fixed() const { return slot_ >= 0; }
    // The plain fd, or -1 for a slot: only for syscalls outside the ring.
    int fd() const { return plain_.get(); }
    uring::FileRef ref() const {
        return slot_ >= 0 ? uring::FileRef::direct(slot_) : uring::FileRef::plain(plain_.get());
    }

private:
    uring::UniqueFd plain_;
    int slot_ = -1;
};

} // namespace uringfwd::engine
