#include "cli/process_log.hpp"

namespace uringfwd::cli {

engine::Logger process_log(LogLevel level) {
    return engine::Logger(level, nullptr, "uring-fwd");
}

engine::Logger answer_log() {
    return process_log(LogLevel::Debug); // every level enabled
}

} // namespace uringfwd::cli
