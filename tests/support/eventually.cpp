#include "tests/support/eventually.hpp"

#include <thread>

namespace uringfwd::test {

bool eventually(const std::function<bool()>& condition, const Deadline& deadline,
                milliseconds every) {
    for (;;) {
        if (condition())
            return true;
        if (deadline.expired())
            return condition();
        std::this_thread::sleep_for(every);
    }
}

} // namespace uringfwd::test
