// The binary's own lines (start, signals, upgrade, counters, exit, errors) in the
// engine's format, so everything the process prints reads alike and sorts by time:
//   2026-12-01T13:05:01.123Z info uring-fwd: SIGHUP: reloaded /etc/uring-fwd/uring-fwd.toml
// One write(2) per line (support/logger.cpp), as the shards' lines.
#pragma once

#include "support/logger.hpp"

namespace uringfwd::cli {

// Under the prefix "uring-fwd", every level written: --log-level filters the engine's
// lines, while these are one per event an operator caused or must know of (the start,
// a signal, a reload, the exit), as they were before they carried a level, and scripts
// and tests wait for the start line.
engine::Logger process_log();

} // namespace uringfwd::cli
