#include "tests/support/blackhole.hpp"

#include <sys/socket.h>

#include <chrono>
#include <stdexcept>

namespace uringfwd::test {

Blackhole::Blackhole() : listener_(listen_loopback(Family::Inet4)) {
    // A backlog of 0 holds one connection (the queue is full past the backlog): a few
    // connects fill it, and the ones that time out meanwhile just confirm it is full.
    if (::listen(listener_.fd(), 0) != 0)
        throw std::runtime_error("listen(0) on the blackhole");
    for (int i = 0; i < 4; ++i) {
        UniqueFd f;
        if (try_connect(listener_.endpoint(), std::chrono::milliseconds{200}, f) == 0)
            fillers_.push_back(std::move(f));
    }
}

} // namespace uringfwd::test
