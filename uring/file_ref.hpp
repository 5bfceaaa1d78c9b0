// A descriptor as an io_uring operation names it: a plain file descriptor of the
// process, or a slot of the ring's registered (fixed, "direct") file table. A fixed
// slot is not an fd: no syscall outside the ring accepts it (fcntl, getsockname,
// close), and the kernel finds its file without touching the process's fd table
// (io_uring/filetable.h io_file_from_index), which is also why slots do not count
// against RLIMIT_NOFILE once the table is registered.
#pragma once

namespace uringfwd::uring {

struct FileRef {
    int index = -1;     // the fd, or the slot in the ring's file table
    bool fixed = false; // index is a slot (IOSQE_FIXED_FILE)

    static FileRef plain(int fd) { return {fd, false}; }
    static FileRef direct(int slot) { return {slot, true}; }
    bool valid() const { return index >= 0; }
    bool operator==(const FileRef&) const = default;
};

} // namespace uringfwd::uring
