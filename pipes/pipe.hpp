// One kernel pipe used as a splice buffer, with the count of bytes it holds.
#pragma once

#include <cstddef>

namespace uringfwd::pipes {

// Owns both ends. The byte count is kept by whoever splices through the pipe: the
// kernel offers no reliable way to ask (FIONREAD counts bytes, but capacity is in
// slots, see docs/kernel.md §2.4), so this counter is the only truth about what is in
// the pipe.
class Pipe {
public:
    Pipe(int read_fd, int write_fd, std::size_t capacity)
        : read_fd_(read_fd), write_fd_(write_fd), capacity_(capacity) {}
    ~Pipe();
    Pipe(Pipe&& other) noexcept;
    Pipe& operator=(Pipe&& other) noexcept;
    Pipe(const Pipe&) = delete;
    Pipe& operator=(const Pipe&) = delete;

    int read_fd() const { return read_fd_; }
    int write_fd() const { return write_fd_; }
    std::size_t capacity() const { return capacity_; }
    std::size_t bytes() const { return bytes_; }
    bool empty() const { return bytes_ == 0; }

    // Asks the kernel how many bytes the pipe holds (FIONREAD): a syscall, for the
    // paths where a wrong counter would be a leak between streams.
    std::size_t queued_bytes() const;

    // Gives up both fds without closing them (they go to another owner: a connection
    // handed over with what its pipe holds): {read end, write end}. The pipe is empty
    // and fd-less after.
    struct Ends {
        int read_fd;
        int write_fd;
    };
    Ends release();

    void set_capacity(std::size_t capacity) { capacity_ = capacity; }
    void filled(std::size_t n) { bytes_ += n; }
    void drained(std::size_t n) { bytes_ -= n; }

private:
    void close_both();

    int read_fd_ = -1;
    int write_fd_ = -1;
    std::size_t capacity_ = 0;
    std::size_t bytes_ = 0;
};

} // namespace uringfwd::pipes
