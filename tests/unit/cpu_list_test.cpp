// cpulist parsing/formatting against the forms sysfs and taskset produce, and the
// malformed inputs a user might type.
#include "uringfwd/cpu_list.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace uringfwd {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string error_of(std::string_view text) {
    try {
        (void)parse_cpu_list(text);
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    return "";
}

std::vector<int> range(int first, int last) {
    std::vector<int> out;
    for (int i = first; i <= last; ++i) {
        out.push_back(i);
    }
    return out;
}

TEST(ParseCpuList, SingleAndList) {
    EXPECT_THAT(parse_cpu_list("0"), ElementsAre(0));
    EXPECT_THAT(parse_cpu_list("0,2,4"), ElementsAre(0, 2, 4));
}

TEST(ParseCpuList, Ranges) {
    std::vector<int> expected = range(0, 7);
    const std::vector<int> high = range(16, 23);
    expected.insert(expected.end(), high.begin(), high.end());
    EXPECT_EQ(parse_cpu_list("0-7,16-23"), expected);
    EXPECT_THAT(parse_cpu_list("3-3"), ElementsAre(3));
}

TEST(ParseCpuList, EmptyIsEmptySet) {
    EXPECT_THAT(parse_cpu_list(""), IsEmpty());
    EXPECT_THAT(parse_cpu_list("\n"), IsEmpty());
    EXPECT_THAT(parse_cpu_list("  \t\n"), IsEmpty());
}

TEST(ParseCpuList, WhitespaceAndSysfsNewline) {
    EXPECT_THAT(parse_cpu_list("0-1,4\n"), ElementsAre(0, 1, 4));
    EXPECT_THAT(parse_cpu_list(" 0 - 1 , 4 "), ElementsAre(0, 1, 4));
    EXPECT_THAT(parse_cpu_list("\t2\r\n"), ElementsAre(2));
}

TEST(ParseCpuList, SortsAndDeduplicates) {
    EXPECT_THAT(parse_cpu_list("8,0-3,2,1-2,8"), ElementsAre(0, 1, 2, 3, 8));
}

TEST(ParseCpuList, UpperBound) {
    EXPECT_THAT(parse_cpu_list("4095"), ElementsAre(4095));
    EXPECT_EQ(parse_cpu_list("0-4095").size(), 4096u);
    EXPECT_THAT(error_of("4096"), HasSubstr("0-4095"));
    EXPECT_THAT(error_of("0-4096"), HasSubstr("0-4095"));
    EXPECT_THAT(error_of("99999999999999999999999"), HasSubstr("0-4095"));
}

TEST(ParseCpuList, ReversedRange) {
    EXPECT_EQ(error_of("7-3"), "bad CPU list \"7-3\": range 7-3 is reversed");
}

TEST(ParseCpuList, EmptyItems) {
    for (const char* text : {",", "0,", ",0", "0,,1", "0-", "-3", "0-,1", " , "}) {
        EXPECT_THAT(error_of(text), HasSubstr("expected a CPU number")) << text;
    }
}

TEST(ParseCpuList, Garbage) {
    for (const char* text : {"a", "0x1", "1 2", "0-3-5", "+1", "1.5", "0;1", "0-3:2/4"}) {
        EXPECT_FALSE(error_of(text).empty()) << text;
    }
}

TEST(ParseCpuList, MessageStaysOnOneLine) {
    const std::string message = error_of("0\n1");
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_THAT(message, HasSubstr("\"0\\x0a1\""));
}

TEST(FormatCpuList, Forms) {
    EXPECT_EQ(format_cpu_list({}), "");
    EXPECT_EQ(format_cpu_list({5}), "5");
    EXPECT_EQ(format_cpu_list({0, 2, 4}), "0,2,4");
    EXPECT_EQ(format_cpu_list({0, 1}), "0-1");
    EXPECT_EQ(format_cpu_list({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
}

TEST(FormatCpuList, SortsAndDeduplicates) {
    EXPECT_EQ(format_cpu_list({3, 1, 2, 2, 0, 9}), "0-3,9");
}

TEST(FormatCpuList, RejectsOutOfRange) {
    EXPECT_THROW((void)format_cpu_list({-1}), std::invalid_argument);
    EXPECT_THROW((void)format_cpu_list({0, 4096}), std::invalid_argument);
}

class CpuListRoundTrip : public ::testing::TestWithParam<const char*> {};

TEST_P(CpuListRoundTrip, ParseOfFormatIsIdentity) {
    const std::vector<int> cpus = parse_cpu_list(GetParam());
    EXPECT_EQ(parse_cpu_list(format_cpu_list(cpus)), cpus);
}

INSTANTIATE_TEST_SUITE_P(Forms, CpuListRoundTrip,
                         ::testing::Values("", "0", "0-7,16-23", "0,2,4", "4095", "1,0", "0-4095",
                                           "0-3,8-11\n", "5,4,3-9,1"),
                         [](const auto& info) { return std::to_string(info.index); });

} // namespace
} // namespace uringfwd
