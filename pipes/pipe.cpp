#include "pipes/pipe.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <utility>

namespace uringfwd::pipes {

Pipe::~Pipe() {
    close_both();
}

Pipe::Pipe(Pipe&& other) noexcept
    : read_fd_(std::exchange(other.read_fd_, -1)), write_fd_(std::exchange(other.write_fd_, -1)),
      capacity_(other.capacity_), bytes_(std::exchange(other.bytes_, 0)) {}

Pipe& Pipe::operator=(Pipe&& other) noexcept {
    if (this != &other) {
        close_both();
        read_fd_ = std::exchange(other.read_fd_, -1);
        write_fd_ = std::exchange(other.write_fd_, -1);
        capacity_ = other.capacity_;
        bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
}

Pipe::Ends Pipe::release() {
    bytes_ = 0;
    return {std::exchange(read_fd_, -1), std::exchange(write_fd_, -1)};
}

std::size_t Pipe::queued_bytes() const {
    int n = 0;
    if (::ioctl(read_fd_, FIONREAD, &n) != 0)
        return 1; // cannot tell: treat as not empty
    return static_cast<std::size_t>(n);
}

void Pipe::close_both() {
    if (read_fd_ >= 0)
        ::close(read_fd_);
    if (write_fd_ >= 0)
        ::close(write_fd_);
    read_fd_ = write_fd_ = -1;
}

} // namespace uringfwd::pipes
