#include "tests/support/socket_io.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <vector>

namespace uringfwd::test {

std::string to_string(IoStatus status) {
    switch (status) {
    case IoStatus::Ok:
        return "ok";
    case IoStatus::Eof:
        return "eof";
    case IoStatus::Reset:
        return "reset";
    case IoStatus::Error:
        return "error";
    case IoStatus::Timeout:
        return "timeout";
    case IoStatus::Cancelled:
        return "cancelled";
    case IoStatus::NotDone:
        return "not-done";
    }
    return "?";
}

IoStatus classify_errno(int err) {
    return (err == ECONNRESET || err == EPIPE || err == ECONNABORTED) ? IoStatus::Reset
                                                                      : IoStatus::Error;
}

namespace {

// Waits for `events` on fd; false on timeout. Errors/hangups count as ready so that the
// following send/recv reports them.
bool wait_ready(int fd, short events, const Deadline& deadline) {
    for (;;) {
        pollfd pfd{fd, events, 0};
        const int n = ::poll(&pfd, 1, deadline.poll_timeout_ms());
        if (n > 0) {
            return true;
        }
        if (n == 0) {
            return false;
        }
        if (errno != EINTR) {
            return true; // let the I/O call report the problem
        }
    }
}

} // namespace

IoResult send_all(int fd, std::span<const std::byte> data, const Deadline& deadline) {
    IoResult r;
    while (r.bytes < data.size()) {
        if (!wait_ready(fd, POLLOUT, deadline)) {
            r.status = IoStatus::Timeout;
            return r;
        }
        const ssize_t n =
            ::send(fd, data.data() + r.bytes, data.size() - r.bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n >= 0) {
            r.bytes += static_cast<std::size_t>(n);
        } else if (errno != EAGAIN && errno != EINTR) {
            r.error = errno;
            r.status = classify_errno(errno);
            return r;
        }
    }
    r.status = IoStatus::Ok;
    return r;
}

IoResult recv_all(int fd, std::span<std::byte> out, const Deadline& deadline) {
    IoResult r;
    while (r.bytes < out.size()) {
        if (!wait_ready(fd, POLLIN, deadline)) {
            r.status = IoStatus::Timeout;
            return r;
        }
        const ssize_t n = ::recv(fd, out.data() + r.bytes, out.size() - r.bytes, MSG_DONTWAIT);
        if (n > 0) {
            r.bytes += static_cast<std::size_t>(n);
        } else if (n == 0) {
            r.status = IoStatus::Eof;
            return r;
        } else if (errno != EAGAIN && errno != EINTR) {
            r.error = errno;
            r.status = classify_errno(errno);
            return r;
        }
    }
    r.status = IoStatus::Ok;
    return r;
}

IoResult recv_until_eof(int fd, const Deadline& deadline,
                        const std::function<void(std::span<const std::byte>)>& on_data,
                        std::size_t chunk) {
    IoResult r;
    std::vector<std::byte> buf(chunk);
    for (;;) {
        if (!wait_ready(fd, POLLIN, deadline)) {
            r.status = IoStatus::Timeout;
            return r;
        }
        const ssize_t n = ::recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
        if (n > 0) {
            r.bytes += static_cast<std::size_t>(n);
            if (on_data) {
                on_data(std::span<const std::byte>(buf.data(), static_cast<std::size_t>(n)));
            }
        } else if (n == 0) {
            r.status = IoStatus::Eof;
            return r;
        } else if (errno != EAGAIN && errno != EINTR) {
            r.error = errno;
            r.status = classify_errno(errno);
            return r;
        }
    }
}

IoResult send_text(int fd, const std::string& text, const Deadline& deadline) {
    return send_all(fd, std::as_bytes(std::span<const char>(text.data(), text.size())), deadline);
}

} // namespace uringfwd::test
