// Inside uring/ only: what Ring hides behind its pointer, shared with the classes that
// register things on the ring (ProvidedBuffers).
#pragma once

#include "uring/ring.hpp"

#include <liburing.h>

#include <deque>

namespace uringfwd::uring {

struct Ring::State {
    io_uring ring{};
    // IORING_OP_TIMEOUT and LINK_TIMEOUT read their timespec when the SQE is submitted,
    // not when it is prepared, so each one lives here until the next submit.
    // A deque never moves its elements on push_back.
    std::deque<__kernel_timespec> timespecs;
};

} // namespace uringfwd::uring
