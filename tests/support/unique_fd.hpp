// The tests own their fds with the engine's own RAII type, so no test leaks fds into
// the fd-count checks.
#pragma once

#include "uring/unique_fd.hpp"

namespace uringfwd::test {

using UniqueFd = uring::UniqueFd;

} // namespace uringfwd::test
