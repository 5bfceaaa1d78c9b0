// The headers most test files include, compiled once per test target instead of once
// per file (meson's cpp_pch). gtest, gmock and fmt are most of a test file's parse time:
// with this header a test file compiled about 20 % faster (measured on
// tests/integration/access_log_test.cpp, see test.sh). Only outside headers belong here:
// a project header would rebuild every test on each change to it. Every test file still
// includes what it uses, so it builds without the precompiled header too (-Db_pch=false).
// With gmock precompiled, GCC 12 at -O2 reports a false -Warray-bounds in the move of a
// std::string temporary built by operator+ (std::string(...) + "..."; the same report
// with a precompiled gmock: https://github.com/canonical/mir/issues/2987), so the tests
// build such strings with fmt::format or append instead. ccache caches a file compiled
// with this header only under CCACHE_SLOPPINESS=pch_defines,time_macros (ccache's manual,
// "Precompiled headers"); without it, ccache compiles the file each time.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>
