// The outside headers most of the engine's files include, compiled once per library
// instead of once per file (meson's cpp_pch, on unless -Db_pch=false). fmt and the
// standard library are most of an engine file's parse time: with this header
// engine/shard/connection/connections.cpp compiled in 1.4 s instead of 2.6 s at -O2 and
// in 2.2 s instead of 3.3 s at -O0 with ASan (GCC 12, one file at a time, no ccache).
// Only outside headers belong here: a project header would rebuild the whole library
// on each change to it. Every file still includes what it uses; test.sh's release build
// (-Db_pch=false) and the fuzz targets (clang, no meson) compile without this header,
// so one that does not fails there.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
