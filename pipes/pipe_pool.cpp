#include "pipes/pipe_pool.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

namespace uringfwd::pipes {

std::size_t system_pipe_max_size() {
    std::ifstream in("/proc/sys/fs/pipe-max-size");
    std::size_t size = 0;
    if (in >> size && size > 0)
        return size;
    return 1024 * 1024;
}

PipePool::PipePool(std::size_t max_pipes, std::size_t wanted_size)
    : max_pipes_(max_pipes), policy_(wanted_size != 0 ? wanted_size : system_pipe_max_size()) {
    idle_.reserve(max_pipes);
}

std::optional<Pipe> PipePool::lease() {
    if (!idle_.empty()) {
        Pipe pipe = std::move(idle_.back());
        idle_.pop_back();
        ++counters_.leased_now;
        return pipe;
    }
    if (counters_.leased_now >= max_pipes_)
        return std::nullopt;
    std::optional<Pipe> pipe = create();
    if (pipe)
        ++counters_.leased_now;
    return pipe;
}

void PipePool::give_back(Pipe pipe, Check check) {
    --counters_.leased_now;
    if (!pipe.empty() || (check == Check::AskKernel && pipe.queued_bytes() != 0)) {
        ++counters_.closed_dirty;
        return; // destructor closes it
    }
    if (idle_.size() + counters_.leased_now >= max_pipes_)
        return; // one adopted (adopt()) above the bound: closed, so the bound holds again
    // A pipe smaller than what we now ask for is still fine to reuse; a larger one
    // (made before a reduction) keeps its size, which the budget already allowed.
    idle_.push_back(std::move(pipe));
}

Pipe PipePool::let_go(Pipe pipe) {
    --counters_.leased_now;
    return pipe;
}

std::optional<Pipe> PipePool::create() {
    int fds[2];
    // Non-blocking on both ends: a splice into a full pipe or out of an empty one must
    // return -EAGAIN instead of parking an io-wq thread (docs/kernel.md §2.1, §3).
    if (::pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) {
        int err = errno;
        ++counters_.create_failures;
        if (!reported_create_failure_) {
            reported_create_failure_ = true;
            notices_.push_back(
                fmt::format("cannot create a pipe ({}); directions wait for a pipe to come back",
                            std::strerror(err)));
        }
        return std::nullopt;
    }
    Pipe pipe(fds[0], fds[1], 0); // owns the fds from here on
    std::size_t capacity = 0;
    for (;;) {
        std::size_t want = policy_.wanted();
        int got = ::fcntl(pipe.write_fd(), F_SETPIPE_SZ, static_cast<int>(want));
        if (got >= 0) {
            capacity = static_cast<std::size_t>(got);
            break;
        }
        int err = errno;
        if (err != EPERM || !policy_.refused(want))
            break; // keep the size pipe2() gave us
        if (!reported_reduction_) {
            reported_reduction_ = true;
            notices_.push_back(fmt::format(
                "kernel refused {}-byte pipes (EPERM: above fs.pipe-max-size, or the per-user "
                "budget fs.pipe-user-pages-soft is spent); asking for {} bytes from now on",
                want, policy_.wanted()));
        }
    }
    counters_.size_reductions = policy_.reductions();
    if (capacity == 0) {
        // Over the soft budget the kernel hands out 2-slot pipes and refuses to grow
        // them (fs/pipe.c alloc_pipe_info); work with what we got.
        int got = ::fcntl(pipe.write_fd(), F_GETPIPE_SZ);
        capacity = got > 0 ? static_cast<std::size_t>(got) : 4096;
    }
    pipe.set_capacity(capacity);
    ++counters_.created;
    return pipe;
}

std::vector<std::string> PipePool::take_notices() {
    std::vector<std::string> out;
    out.swap(notices_);
    return out;
}

} // namespace uringfwd::pipes
