// The file of a Unix listener in the filesystem: what may be removed to bind a path
// (a socket nobody accepts on, nothing else), and the file our own bind(2) made,
// removed later only while the path still names that very socket. A failed start, a
// second instance or a successor must never delete a file it did not create.
// Public (the uring-fwd binary's control socket follows the same rules as the engine's
// Unix listeners).
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

namespace uringfwd {

// Makes room for a bind at `path`, which bind(2) found taken (EADDRINUSE). Removes it
// only when lstat(2) says it is a socket and a connect(2) to it is refused: a file left
// by a process that ended (nginx decides the same way). Anything else throws
// std::runtime_error naming `shown` (how the address is written, "unix:/run/a.sock")
// and what is there: another kind of file, or a socket someone accepts on.
void clear_stale_socket(const std::string& path, std::string_view shown);

// bind(2) of the Unix socket `fd` to `path` by these rules: when the path is taken
// (EADDRINUSE), clear_stale_socket(path, shown) makes room (it throws for anything but
// a socket file nobody accepts on) and the bind is tried once more. 0, or -1 with errno
// set, as bind(2) (ENAMETOOLONG for a path longer than sun_path holds). The caller
// records the file its bind made (OwnedSocketFile).
int bind_unix_path(int fd, const std::string& path, std::string_view shown);

// The socket file a bind(2) of ours just made. Move-only; removes the file when
// destroyed or on remove(), unless disown() was called, and only if the path is still
// a socket with the device and inode it had right after the bind (another process
// may have replaced it since).
class OwnedSocketFile {
public:
    OwnedSocketFile() = default;
    // Records the file at `path` as ours (lstat now). Throws std::runtime_error when
    // it is not a socket (something replaced it between bind and now).
    explicit OwnedSocketFile(std::string path);
    ~OwnedSocketFile() { remove(); }
    OwnedSocketFile(OwnedSocketFile&& other) noexcept;
    OwnedSocketFile& operator=(OwnedSocketFile&& other) noexcept;
    OwnedSocketFile(const OwnedSocketFile&) = delete;
    OwnedSocketFile& operator=(const OwnedSocketFile&) = delete;

    // Unlinks the path if it still names our socket; the file is no longer ours
    // either way.
    void remove();
    // Leaves the file where it is, for good: the socket is another process's now.
    void disown() { path_.clear(); }

    bool owned() const { return !path_.empty(); }
    const std::string& path() const { return path_; }
    // Whether `path` names our socket right now (lstat: a socket, same device and inode).
    bool unchanged() const;

private:
    std::string path_; // empty: nothing owned
    dev_t device_ = 0;
    ino_t inode_ = 0;
};

} // namespace uringfwd
