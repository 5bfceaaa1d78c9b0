#include "support/logger.hpp"

#include <unistd.h>

#include <chrono>
#include <ctime>

namespace uringfwd::engine {

namespace {
// One write(2) per line: lines from different shard threads never interleave.
void write_to_stderr(LogLevel, std::string_view line) {
    std::string out(line);
    out += '\n';
    const char* data = out.data();
    std::size_t left = out.size();
    while (left > 0) {
        ssize_t n = ::write(STDERR_FILENO, data, left);
        if (n <= 0)
            return;
        data += n;
        left -= static_cast<std::size_t>(n);
    }
}

std::string timestamp() {
    auto now = std::chrono::system_clock::now();
    std::time_t secs = std::chrono::system_clock::to_time_t(now);
    auto millis =
        std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
    std::tm tm{};
    gmtime_r(&secs, &tm);
    return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900,
                       tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, millis.count());
}
} // namespace

Logger::Logger(LogLevel level, LogSink sink, std::string prefix)
    : level_(level), sink_(sink ? std::move(sink) : LogSink(write_to_stderr)),
      prefix_(std::move(prefix)) {}

void Logger::emit(LogLevel level, const std::string& message) const {
    write_log_line(sink_, level, prefix_, message);
}

} // namespace uringfwd::engine

namespace uringfwd {

void write_log_line(const LogSink& sink, LogLevel level, std::string_view who,
                    std::string_view message) {
    const std::string line =
        fmt::format("{} {} {}: {}", engine::timestamp(), to_string(level), who, message);
    if (sink)
        sink(level, line);
    else
        engine::write_to_stderr(level, line);
}

} // namespace uringfwd
