// One message over a SOCK_SEQPACKET Unix socket, with fds (SCM_RIGHTS): the upgrade
// socket's conversation (upgrade.hpp) and the connections' hand-over after it
// (connection_handover.hpp).
#pragma once

#include "ops/unique_fd.hpp"

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace uringfwd::cli {

// Below the kernel's SCM_MAX_FD (253, include/net/scm.h) per message.
inline constexpr std::size_t kFdsPerMessage = 250;

// Throws std::runtime_error ("upgrade socket: send: ...").
void send_message(int fd, std::string_view text, const int* fds = nullptr, std::size_t count = 0);

// One message of at most `max_bytes`; fds it carries are appended to `fds`
// (close-on-exec; closed when `fds` is null). Throws on an error, a timeout (the
// socket's SO_RCVTIMEO) or the peer closing.
std::string receive_message(int fd, std::vector<ops::UniqueFd>* fds = nullptr,
                            std::size_t max_bytes = 256);

} // namespace uringfwd::cli
