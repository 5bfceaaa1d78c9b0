// The binary's own lines (start, signals, upgrade, counters, exit, errors) in the
// engine's format, so everything the process prints reads alike and sorts by time:
//   2026-12-01T13:05:01.123Z info uring-fwd: SIGHUP: reloaded /etc/uring-fwd/uring-fwd.toml
// One write(2) per line (support/logger.cpp), as the shards' lines.
#pragma once

#include "support/logger.hpp"
#include "uringfwd/log.hpp"

namespace uringfwd::cli {

// Lines up to `level` (--log-level), under the prefix "uring-fwd".
engine::Logger process_log(LogLevel level);

// For lines an operator asked for (SIGUSR1's counters): written whatever --log-level
// says, at level info.
engine::Logger answer_log();

} // namespace uringfwd::cli
