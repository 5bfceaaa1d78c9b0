// What a test of the binary's socket files needs (Unix listeners, the control socket,
// the upgrade socket): what is at a path, a stale socket file to leave there, and the
// binary started to fail or stopped to exit.
#pragma once

#include "tests/support/binary_process.hpp"

#include <sys/types.h>

#include <string>
#include <vector>

namespace uringfwd::test {

// What lstat(2) says is at a path; all zero when nothing is.
struct FileId {
    bool exists = false;
    bool socket = false;
    bool directory = false;
    dev_t device = 0;
    ino_t inode = 0;
    mode_t permissions = 0; // st_mode & 07777
    bool operator==(const FileId&) const = default;
};
FileId identify(const std::string& path);

// A file's whole text ("" when it cannot be read).
std::string contents(const std::string& path);

// Binds a socket of `type` (SOCK_STREAM, SOCK_SEQPACKET) at `path` and closes it without
// ever listening: the file stays and refuses connects, as one left by a process that
// was killed. False (with the reason added as a test failure) when it could not.
bool leave_stale_socket(const std::string& path, int type);

// Runs the binary with `args`, which must fail to start within 10 s with exit status 1
// (a test failure otherwise): its stderr.
std::string failed_start(std::vector<std::string> args);

// SIGTERM, then expects the process to exit 0 within 10 s.
void stop(BinaryProcess& proc);

} // namespace uringfwd::test
