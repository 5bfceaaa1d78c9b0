// The control socket's language (README "Runtime control"): one command per line, words
// separated by spaces or tabs, a last word `json` asking for the reply as JSON. Pure: a
// line in, a Command or one line saying what is wrong out; nothing here touches an
// engine, so the parser is unit-tested and fuzzed alone (tests/fuzz/control_fuzz.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace uringfwd::cli::control {

// The longest line a client may send, newline included; a longer one is refused and the
// connection closed (ControlSession). Commands are a few dozen bytes: 4 KiB leaves room
// for long route names and addresses and still bounds what one client holds.
inline constexpr std::size_t kMaxLineBytes = 4096;
// Words in a command at most: the longest grammar has 8 (`add member R A weight N
// backup json`), so more are a mistake, refused before anything else is looked at.
inline constexpr std::size_t kMaxWords = 16;

enum class Verb {
    Help,
    ShowInfo,
    ShowStats,
    ShowRoutes,
    ShowMembers,      // [ROUTE]
    ShowConnections,  // [ROUTE [MEMBER]] [limit N]
    SetMemberState,   // ROUTE MEMBER state ready|drain|maint
    SetMemberWeight,  // ROUTE MEMBER weight N
    AddMember,        // ROUTE ADDRESS [weight N] [backup]
    DelMember,        // ROUTE MEMBER
    CloseConnection,  // ID
    CloseConnections, // ROUTE [MEMBER]
    MoveConnection,   // ID SHARD
    Rebalance,
};

struct Command {
    Verb verb = Verb::Help;
    bool json = false; // the last word was `json`
    std::string route;
    std::string member;             // a member's key or address
    std::string state;              // SetMemberState: "ready", "drain" or "maint"
    std::optional<unsigned> weight; // SetMemberWeight; AddMember when given
    bool backup = false;            // AddMember
    std::size_t limit = 0;          // ShowConnections; 0: the default (kDefaultConnectionLimit)
    uint64_t id = 0;                // CloseConnection, MoveConnection
    unsigned shard = 0;             // MoveConnection
};

// Connections `show connections` lists unless told otherwise: a reply stays a few
// hundred KiB even on an engine with a million open.
inline constexpr std::size_t kDefaultConnectionLimit = 1000;
inline constexpr std::size_t kMaxConnectionLimit = 10000;
// A member's weight, as the file's [[route.upstream]] weight takes it (route_section.cpp).
inline constexpr unsigned kMaxWeight = 1000;

struct ParseResult {
    std::optional<Command> command;
    std::string error; // when no command: one line, without the "error: " prefix
};

// One line, without its newline (a trailing '\r' is ignored, for telnet and nc -C).
ParseResult parse_command(std::string_view line);

// One line per command for `help`: its grammar and what it does.
struct CommandHelp {
    std::string_view usage;
    std::string_view summary;
};
const std::vector<CommandHelp>& command_help();

} // namespace uringfwd::cli::control
