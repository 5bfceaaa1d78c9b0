// Formats log lines and hands them to the configured sink. One per shard (the prefix
// names the shard); nothing global.
#pragma once

#include "uringfwd/log.hpp"

#include <fmt/format.h>

#include <string>
#include <utility>

namespace uringfwd::engine {

class Logger {
public:
    Logger(LogLevel level, LogSink sink, std::string prefix);

    bool enabled(LogLevel level) const { return level <= level_; }

    template <typename... Args>
    void log(LogLevel level, fmt::format_string<Args...> format, Args&&... args) const {
        if (enabled(level))
            emit(level, fmt::format(format, std::forward<Args>(args)...));
    }
    template <typename... Args>
    void error(fmt::format_string<Args...> format, Args&&... args) const {
        log(LogLevel::Error, format, std::forward<Args>(args)...);
    }
    template <typename... Args>
    void warn(fmt::format_string<Args...> format, Args&&... args) const {
        log(LogLevel::Warn, format, std::forward<Args>(args)...);
    }
    template <typename... Args>
    void info(fmt::format_string<Args...> format, Args&&... args) const {
        log(LogLevel::Info, format, std::forward<Args>(args)...);
    }
    template <typename... Args>
    void debug(fmt::format_string<Args...> format, Args&&... args) const {
        log(LogLevel::Debug, format, std::forward<Args>(args)...);
    }

    Logger with_prefix(std::string prefix) const {
        return Logger(level_, sink_, std::move(prefix));
    }

private:
    void emit(LogLevel level, const std::string& message) const;

    LogLevel level_;
    LogSink sink_;
    std::string prefix_;
};

} // namespace uringfwd::engine
