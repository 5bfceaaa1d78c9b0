// The control socket's language (engine/cli/control/command.hpp): every command and its
// arguments, the `json` suffix, and the one-line errors of what is not a command, with
// the closest command when one is near. And LineBuffer, which bounds what a client holds.
#include "cli/control/command.hpp"
#include "cli/control/line_buffer.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace uringfwd::cli::control {
namespace {

using ::testing::HasSubstr;

Command parsed(std::string_view line) {
    ParseResult r = parse_command(line);
    EXPECT_TRUE(r.command.has_value()) << line << ": " << r.error;
    return r.command.value_or(Command{});
}

std::string error_of(std::string_view line) {
    ParseResult r = parse_command(line);
    EXPECT_FALSE(r.command.has_value()) << line;
    EXPECT_EQ(r.error.find('\n'), std::string::npos) << r.error; // always one line
    return r.error;
}

TEST(ControlCommand, ShowCommands) {
    EXPECT_EQ(parsed("help").verb, Verb::Help);
    EXPECT_EQ(parsed("show info").verb, Verb::ShowInfo);
    EXPECT_EQ(parsed("show stats").verb, Verb::ShowStats);
    EXPECT_EQ(parsed("show routes").verb, Verb::ShowRoutes);
    const Command all = parsed("show members");
    EXPECT_EQ(all.verb, Verb::ShowMembers);
    EXPECT_EQ(all.route, "");
    EXPECT_EQ(parsed("show members web").route, "web");
}

TEST(ControlCommand, JsonAsTheLastWord) {
    const Command c = parsed("show info json");
    EXPECT_EQ(c.verb, Verb::ShowInfo);
    EXPECT_TRUE(c.json);
    EXPECT_FALSE(parsed("show info").json);
    const Command members = parsed("show members web json");
    EXPECT_EQ(members.route, "web");
    EXPECT_TRUE(members.json);
    EXPECT_TRUE(parsed("help json").json);
}

TEST(ControlCommand, SpacesTabsAndCarriageReturn) {
    const Command c = parsed("  show \t members   web \r");
    EXPECT_EQ(c.verb, Verb::ShowMembers);
    EXPECT_EQ(c.route, "web");
}

TEST(ControlCommand, ShowConnectionsFilters) {
    const Command none = parsed("show connections");
    EXPECT_EQ(none.verb, Verb::ShowConnections);
    EXPECT_EQ(none.route, "");
    EXPECT_EQ(none.limit, 0u);
    const Command both = parsed("show connections web 10.0.0.1:80 limit 5 json");
    EXPECT_EQ(both.route, "web");
    EXPECT_EQ(both.member, "10.0.0.1:80");
    EXPECT_EQ(both.limit, 5u);
    EXPECT_TRUE(both.json);
    EXPECT_EQ(parsed("show connections limit 3").limit, 3u);
    EXPECT_EQ(parsed("show connections limit 3").route, "");
    EXPECT_THAT(error_of("show connections limit 0"),
                HasSubstr("limit must be 1..10000, not \"0\""));
    EXPECT_THAT(error_of("show connections limit x"), HasSubstr("not \"x\""));
    EXPECT_THAT(error_of("show connections a b c"), HasSubstr("too many arguments"));
}

TEST(ControlCommand, SetMember) {
    const Command drain = parsed("set member web 10.0.0.1:80 state drain");
    EXPECT_EQ(drain.verb, Verb::SetMemberState);
    EXPECT_EQ(drain.route, "web");
    EXPECT_EQ(drain.member, "10.0.0.1:80");
    EXPECT_EQ(drain.state, "drain");
    EXPECT_EQ(parsed("set member web a state maint").state, "maint");
    EXPECT_EQ(parsed("set member web a state ready").state, "ready");
    const Command weight = parsed("set member web a weight 7");
    EXPECT_EQ(weight.verb, Verb::SetMemberWeight);
    EXPECT_EQ(weight.weight, 7u);
    EXPECT_EQ(error_of("set member web a state off"),
              "set member: state must be ready, drain or maint, not \"off\"; usage: set member "
              "ROUTE MEMBER state ready|drain|maint | set member ROUTE MEMBER weight N");
    EXPECT_THAT(error_of("set member web a weight 0"),
                HasSubstr("weight must be 1..1000, not \"0\""));
    EXPECT_THAT(error_of("set member web a weight 1001"), HasSubstr("not \"1001\""));
    EXPECT_THAT(error_of("set member web a weight -1"), HasSubstr("not \"-1\""));
    EXPECT_THAT(error_of("set member web a"), HasSubstr("missing arguments"));
    EXPECT_THAT(error_of("set member web a colour red"), HasSubstr("\"colour\" is neither"));
}

TEST(ControlCommand, AddAndDelMember) {
    const Command add = parsed("add member web 10.0.0.9:80");
    EXPECT_EQ(add.verb, Verb::AddMember);
    EXPECT_EQ(add.member, "10.0.0.9:80");
    EXPECT_FALSE(add.weight.has_value());
    EXPECT_FALSE(add.backup);
    const Command full = parsed("add member web 10.0.0.9:80 weight 3 backup");
    EXPECT_EQ(full.weight, 3u);
    EXPECT_TRUE(full.backup);
    EXPECT_TRUE(parsed("add member web a backup weight 2").backup);
    EXPECT_THAT(error_of("add member web a backup backup"), HasSubstr("unexpected \"backup\""));
    EXPECT_THAT(error_of("add member web"), HasSubstr("missing arguments"));
    const Command del = parsed("del member web 10.0.0.9:80");
    EXPECT_EQ(del.verb, Verb::DelMember);
    EXPECT_THAT(error_of("del member web a b"), HasSubstr("too many arguments"));
}

TEST(ControlCommand, CloseConnections) {
    const Command one = parsed("close connection 42");
    EXPECT_EQ(one.verb, Verb::CloseConnection);
    EXPECT_EQ(one.id, 42u);
    EXPECT_EQ(parsed("close connection 18446744073709551615").id, UINT64_MAX);
    EXPECT_THAT(error_of("close connection 18446744073709551616"), HasSubstr("ID must be"));
    EXPECT_THAT(error_of("close connection 0x10"), HasSubstr("not \"0x10\""));
    const Command route = parsed("close connections web");
    EXPECT_EQ(route.verb, Verb::CloseConnections);
    EXPECT_EQ(route.route, "web");
    EXPECT_EQ(route.member, "");
    EXPECT_EQ(parsed("close connections web a").member, "a");
    EXPECT_THAT(error_of("close connections"), HasSubstr("missing arguments"));
}

TEST(ControlCommand, MoveConnectionAndRebalance) {
    const Command move = parsed("move connection 281474976710657 1");
    EXPECT_EQ(move.verb, Verb::MoveConnection);
    EXPECT_EQ(move.id, 281474976710657u);
    EXPECT_EQ(move.shard, 1u);
    EXPECT_TRUE(parsed("move connection 5 0 json").json);
    EXPECT_THAT(error_of("move connection 5"),
                HasSubstr("move connection: missing arguments; usage: move connection ID SHARD"));
    EXPECT_THAT(error_of("move connection 5 1 2"), HasSubstr("too many arguments"));
    EXPECT_THAT(error_of("move connection x 1"), HasSubstr("ID must be"));
    EXPECT_THAT(error_of("move connection 5 65536"), HasSubstr("SHARD must be"));
    EXPECT_THAT(error_of("move connection 5 -1"), HasSubstr("not \"-1\""));
    EXPECT_EQ(error_of("move conection 5 1"),
              "unknown command \"move conection\" (did you mean \"move connection\"?)");
    EXPECT_EQ(parsed("rebalance").verb, Verb::Rebalance);
    EXPECT_TRUE(parsed("rebalance json").json);
    EXPECT_THAT(error_of("rebalance now"), HasSubstr("rebalance: too many arguments"));
}

TEST(ControlCommand, UnknownCommandsSuggestTheClosest) {
    EXPECT_EQ(error_of("show stat"),
              "unknown command \"show stat\" (did you mean \"show stats\"?)");
    EXPECT_EQ(error_of("shwo info"), "unknown command \"shwo info\" (did you mean \"show info\"?)");
    EXPECT_EQ(error_of("halp"), "unknown command \"halp\" (did you mean \"help\"?)");
    EXPECT_EQ(error_of("frobnicate everything"),
              "unknown command \"frobnicate everything\" (try help)");
    EXPECT_EQ(error_of(""), "empty command (try help)");
    EXPECT_EQ(error_of("   \t "), "empty command (try help)");
    EXPECT_EQ(error_of("json"), "unknown command \"json\" (try help)");
    EXPECT_THAT(error_of("show info extra"), HasSubstr("show info: too many arguments"));
}

TEST(ControlCommand, InputIsQuotedOnOneLine) {
    const std::string e = error_of(std::string("sh\x01w \xff\x7f", 7));
    EXPECT_THAT(e, HasSubstr("\\x01"));
    EXPECT_EQ(e.find('\x01'), std::string::npos);
}

TEST(ControlCommand, TooManyWords) {
    std::string line = "show";
    for (int i = 0; i < 16; ++i)
        line += " x";
    EXPECT_EQ(error_of(line), "more than 16 words");
}

TEST(ControlCommand, HelpListsEveryCommand) {
    std::string all;
    for (const CommandHelp& h : command_help())
        all += std::string(h.usage) + "\n";
    for (const char* c : {"show info", "show stats", "show routes", "show members",
                          "show connections", "set member", "add member", "del member",
                          "close connection ", "close connections", "move connection", "rebalance"})
        EXPECT_THAT(all, HasSubstr(c));
}

TEST(ControlLineBuffer, TakesWholeLinesOneAtATime) {
    LineBuffer b;
    EXPECT_EQ(b.room(), kMaxLineBytes);
    b.append("show in");
    EXPECT_FALSE(b.take_line().has_value());
    b.append("fo\nhelp\npart");
    EXPECT_EQ(b.room(), 0u); // a whole line waits: nothing more is read until it is taken
    EXPECT_EQ(b.take_line(), "show info");
    EXPECT_EQ(b.take_line(), "help");
    EXPECT_FALSE(b.take_line().has_value());
    EXPECT_EQ(b.room(), kMaxLineBytes - 4);
    EXPECT_FALSE(b.too_long());
}

TEST(ControlLineBuffer, ALineWithoutEndIsTooLongAtTheCap) {
    LineBuffer b;
    const std::string chunk(1000, 'x');
    for (int i = 0; i < 10; ++i)
        b.append(chunk); // more than room(): cut there
    EXPECT_TRUE(b.too_long());
    EXPECT_EQ(b.room(), 0u);
    EXPECT_FALSE(b.take_line().has_value());
    // The longest line that fits: kMaxLineBytes with its newline.
    LineBuffer fits;
    std::string longest(kMaxLineBytes - 1, 'y');
    longest.push_back('\n'); // not operator+ (see tests/pch/tests_pch.hpp)
    fits.append(longest);
    EXPECT_FALSE(fits.too_long());
    EXPECT_EQ(fits.take_line()->size(), kMaxLineBytes - 1);
}

} // namespace
} // namespace uringfwd::cli::control
