// The engine's Unix listeners use the public socket-file rules (uringfwd/socket_file.hpp),
// and so do the binary's control and upgrade sockets, through bind_replacing_stale().
#pragma once

#include "uringfwd/socket_file.hpp"

#include <sys/socket.h>

#include <string>
#include <string_view>

namespace uringfwd::engine {

using uringfwd::clear_stale_socket;
using uringfwd::OwnedSocketFile;

// The path of a Unix address bound in the filesystem; empty for the abstract namespace
// and for other families.
std::string unix_path_of(const sockaddr* address, socklen_t length);

// bind(2) of `fd` to `address`. When the address is a Unix path that is taken
// (EADDRINUSE), clear_stale_socket(path, shown) makes room (it throws for anything
// but a socket file nobody accepts on) and the bind is tried once more. 0, or -1 with
// errno set, as bind(2); the caller records the file it made (OwnedSocketFile).
int bind_replacing_stale(int fd, const sockaddr* address, socklen_t length, std::string_view shown);

} // namespace uringfwd::engine
