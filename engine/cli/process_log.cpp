#include "cli/process_log.hpp"

namespace uringfwd::cli {

engine::Logger process_log() {
    return engine::Logger(LogLevel::Debug, nullptr, "uring-fwd"); // every level enabled
}

} // namespace uringfwd::cli
