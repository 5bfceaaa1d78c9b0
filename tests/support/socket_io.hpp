// Blocking send/receive helpers bounded by a deadline (poll before every call), for
// sockets in either blocking or non-blocking mode.
#pragma once

#include "tests/support/deadline.hpp"

#include <cstddef>
#include <functional>
#include <span>
#include <string>

namespace uringfwd::test {

enum class IoStatus {
    Ok,        // everything asked for was transferred
    Eof,       // the peer sent FIN
    Reset,     // ECONNRESET / EPIPE: the peer (or the proxy) reset the connection
    Error,     // any other errno
    Timeout,   // the deadline passed first
    Cancelled, // a cancel fd became readable (server shutting down)
    NotDone,   // this side never ran to completion (e.g. stopped after an abort)
};
std::string to_string(IoStatus status);

struct IoResult {
    IoStatus status = IoStatus::NotDone;
    std::size_t bytes = 0; // transferred before `status` happened
    int error = 0;         // errno for Reset/Error

    // "Eof or Reset or Error": what a client should see when the other end goes away.
    bool ended_by_peer() const {
        return status == IoStatus::Eof || status == IoStatus::Reset || status == IoStatus::Error;
    }
};

// Maps a failed send/recv errno to Reset or Error.
IoStatus classify_errno(int err);

IoResult send_all(int fd, std::span<const std::byte> data, const Deadline& deadline);
// Fills `out` completely; Eof if the peer closes first.
IoResult recv_all(int fd, std::span<std::byte> out, const Deadline& deadline);
// Reads until FIN (status Eof), handing each chunk to `on_data` (may be empty).
IoResult recv_until_eof(int fd, const Deadline& deadline,
                        const std::function<void(std::span<const std::byte>)>& on_data = {},
                        std::size_t chunk = 64 * 1024);
IoResult send_text(int fd, const std::string& text, const Deadline& deadline);

} // namespace uringfwd::test
