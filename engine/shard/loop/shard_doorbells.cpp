#include "shard/loop/shard_doorbells.hpp"

#include "routing/shared_limit.hpp"

#include <fmt/format.h>

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>

namespace uringfwd::engine {

ShardDoorbells::ShardDoorbells(std::size_t shards) {
    for (std::size_t i = 0; i < shards; ++i) {
        fds_.emplace_back(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
        if (!fds_.back())
            throw std::runtime_error(fmt::format("eventfd: {}", std::strerror(errno)));
    }
}

void ShardDoorbells::ring(std::size_t shard) const {
    if (shard >= fds_.size())
        return;
    uint64_t one = 1;
    // Cannot fail in a way worth handling: the counter only saturates after 2^64 - 1.
    [[maybe_unused]] ssize_t n = ::write(fds_[shard].get(), &one, sizeof(one));
}

void ShardDoorbells::give_back(SharedLimit& limit, std::size_t self) const {
    limit.give_back();
    limit.for_each_wanting(self, [this](std::size_t shard) { ring(shard); });
}

} // namespace uringfwd::engine
