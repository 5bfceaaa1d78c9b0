// Log level names: both directions and the rejection of anything not documented.
#include "uringfwd/log.hpp"

#include <gtest/gtest.h>

namespace uringfwd {
namespace {

TEST(LogLevel, ToString) {
    EXPECT_EQ(to_string(LogLevel::Error), "error");
    EXPECT_EQ(to_string(LogLevel::Warn), "warn");
    EXPECT_EQ(to_string(LogLevel::Info), "info");
    EXPECT_EQ(to_string(LogLevel::Debug), "debug");
}

TEST(LogLevel, ParseRoundTrip) {
    for (const LogLevel level :
         {LogLevel::Error, LogLevel::Warn, LogLevel::Info, LogLevel::Debug}) {
        EXPECT_EQ(parse_log_level(to_string(level)), level);
    }
}

TEST(LogLevel, ParseRejectsOthers) {
    for (const char* text :
         {"", "ERROR", "Warn", "warning", "trace", " info", "info ", "debug\n"}) {
        EXPECT_EQ(parse_log_level(text), std::nullopt) << text;
    }
}

} // namespace
} // namespace uringfwd
