// Every shard's wake-up eventfd, made by the engine before the first shard starts and
// never changed after, so any thread may ring any shard: a caller with a change or a
// hand-over, and a shard that has given room back at a SharedLimit to the shards
// waiting for it.
#pragma once

#include "uring/unique_fd.hpp"

#include <cstddef>
#include <vector>

namespace uringfwd::engine {

class SharedLimit;

class ShardDoorbells {
public:
    // Throws std::runtime_error when an eventfd cannot be had.
    explicit ShardDoorbells(std::size_t shards);

    std::size_t size() const { return fds_.size(); }
    int fd(std::size_t shard) const { return fds_[shard].get(); }
    // Wakes `shard` (its loop reads the eventfd and looks at what it waits for).
    void ring(std::size_t shard) const;

    // Gives a unit back to `limit` and rings every other shard that wants room there.
    void give_back(SharedLimit& limit, std::size_t self) const;

private:
    std::vector<uring::UniqueFd> fds_;
};

} // namespace uringfwd::engine
