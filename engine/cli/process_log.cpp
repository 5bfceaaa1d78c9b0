#include "cli/process_log.hpp"

namespace uringfwd::cli {

ProcessLog process_log() {
    return ProcessLog("uring-fwd");
}

} // namespace uringfwd::cli
