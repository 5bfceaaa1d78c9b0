// The one polling helper of the tests: waits for something that settles
// asynchronously (a counter, a line in a log, fds closing after a test), bounded by a
// Deadline so that no test can hang.
#pragma once

#include "tests/support/deadline.hpp"

#include <functional>

namespace uringfwd::test {

// Polls `condition` every `every` (20 ms unless told; 1 ms where the events under test
// are only a few ms apart) until it holds or the deadline passes; returns its last value.
bool eventually(const std::function<bool()>& condition, const Deadline& deadline,
                milliseconds every = milliseconds{20});

} // namespace uringfwd::test
