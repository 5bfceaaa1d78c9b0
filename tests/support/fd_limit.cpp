#include "tests/support/fd_limit.hpp"

#include <sys/resource.h>

namespace uringfwd::test {

uint64_t raise_fd_limit() {
    rlimit lim{};
    if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) {
        return 0;
    }
    if (lim.rlim_cur < lim.rlim_max) {
        rlimit raised = lim;
        raised.rlim_cur = lim.rlim_max;
        if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) {
            lim = raised;
        }
    }
    return lim.rlim_cur;
}

uint64_t raise_fd_limit_to(uint64_t want) {
    rlimit lim{};
    if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) {
        return 0;
    }
    if (lim.rlim_cur < want) {
        rlimit raised{want, lim.rlim_max < want ? want : lim.rlim_max};
        if (::setrlimit(RLIMIT_NOFILE, &raised) != 0) {
            return raise_fd_limit(); // no privilege: as far as the hard limit allows
        }
        lim = raised;
    }
    return lim.rlim_cur;
}

} // namespace uringfwd::test
