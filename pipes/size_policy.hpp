// How big a pipe to ask the kernel for, and what to ask for after it says no.
#pragma once

#include <cstddef>

namespace uringfwd::pipes {

// F_SETPIPE_SZ fails with EPERM when the size exceeds fs.pipe-max-size without
// CAP_SYS_RESOURCE, or when the user's pipes would exceed fs.pipe-user-pages-soft
// (fs/pipe.c pipe_set_size, too_many_pipe_buffers_soft; docs/kernel.md §5). Either
// way, asking again for the same size is pointless: halve it, down to a floor below
// which we simply take what pipe2() gave us.
class SizePolicy {
public:
    // The kernel's default pipe: 16 pages.
    static constexpr std::size_t kFloor = 64 * 1024;

    explicit SizePolicy(std::size_t wanted) : wanted_(wanted < kFloor ? kFloor : wanted) {}

    std::size_t wanted() const { return wanted_; }

    // The kernel refused `size`. Lowers wanted() below it (unless an earlier refusal
    // already did) and returns true, or returns false when size was the floor.
    bool refused(std::size_t size) {
        if (size <= kFloor)
            return false;
        if (wanted_ >= size) {
            wanted_ = size / 2 < kFloor ? kFloor : size / 2;
            ++reductions_;
        }
        return true;
    }

    unsigned reductions() const { return reductions_; }

private:
    std::size_t wanted_;
    unsigned reductions_ = 0;
};

// Reads /proc/sys/fs/pipe-max-size; 1 MiB (the kernel default) when unreadable.
std::size_t system_pipe_max_size();

} // namespace uringfwd::pipes
