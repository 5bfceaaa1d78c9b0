#include "cli/control/command.hpp"

#include "uringfwd/messages.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

namespace uringfwd::cli::control {
namespace {

using Words = std::vector<std::string_view>;

// Splits at runs of spaces and tabs; nullopt past kMaxWords (the caller says so).
std::optional<Words> split_words(std::string_view line) {
    Words words;
    std::size_t i = 0;
    while (i < line.size()) {
        while (i < line.size() && (line[i] == ' ' || line[i] == '\t'))
            ++i;
        if (i == line.size())
            break;
        const std::size_t start = i;
        while (i < line.size() && line[i] != ' ' && line[i] != '\t')
            ++i;
        if (words.size() == kMaxWords)
            return std::nullopt;
        words.push_back(line.substr(start, i - start));
    }
    return words;
}

// A whole decimal number within 0..max, nothing else (no sign, no spaces, no "0x").
std::optional<uint64_t> number(std::string_view text, uint64_t max) {
    uint64_t value = 0;
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (text.empty() || ec != std::errc() || ptr != end || value > max)
        return std::nullopt;
    return value;
}

// The phrases a command starts with, for "did you mean" and for `help`.
const std::vector<CommandHelp> kHelp = {
    {"help", "this list"},
    {"show info", "version, uptime, pid, shards, data path, connections open, config file"},
    {"show stats", "the counters of the SIGUSR1 line, one per line"},
    {"show routes", "each route: listen addresses, policy, members, connections"},
    {"show members [ROUTE]", "each member: state, health, weights, connections"},
    {"show connections [ROUTE [MEMBER]] [limit N]",
     "each open connection: id, route, client, upstream, shard, age, bytes, phase"},
    {"set member ROUTE MEMBER state ready|drain|maint",
     "drain: no new connections; maint: drain and no health checks; ready: back"},
    {"set member ROUTE MEMBER weight N", "its weight, 1..1000"},
    {"add member ROUTE ADDRESS [weight N] [backup]", "a new member of the route's pool"},
    {"del member ROUTE MEMBER", "removes it; its open connections go on until they close"},
    {"close connection ID", "resets both sides of one connection"},
    {"close connections ROUTE [MEMBER]", "resets every connection of a route or member"},
    {"move connection ID SHARD", "moves one connection to another shard, once it is quiet"},
    {"rebalance", "moves connections until no shard has more than one above another"},
};

// The first words of each grammar above: what a mistyped command is compared with.
const std::vector<std::string_view> kPhrases = {
    "help",         "show info",        "show stats",        "show routes",
    "show members", "show connections", "set member",        "add member",
    "del member",   "close connection", "close connections", "move connection",
    "rebalance",
};

ParseResult fail(std::string message) {
    return ParseResult{std::nullopt, std::move(message)};
}

ParseResult ok(Command command) {
    return ParseResult{std::move(command), {}};
}

// Neither a known command nor a known start: the closest phrase, if one is near.
ParseResult unknown(const Words& words) {
    std::string typed(words[0]);
    if (words.size() > 1)
        typed += fmt::format(" {}", words[1]);
    // "show sats" against the two-word phrases; "halp" against "help".
    std::optional<std::string_view> near = closest_name(typed, kPhrases);
    if (!near && words.size() > 1)
        near = closest_name(words[0], kPhrases);
    return fail(fmt::format("unknown command {}{}", quote_input(typed),
                            near ? fmt::format(" (did you mean \"{}\"?)", *near)
                                 : std::string(" (try help)")));
}

// "show members: too many arguments; usage: show members [ROUTE]".
ParseResult usage(std::string_view phrase, std::string_view problem) {
    std::string forms;
    for (const CommandHelp& h : kHelp)
        if (h.usage.starts_with(phrase) &&
            (h.usage.size() == phrase.size() || h.usage[phrase.size()] == ' '))
            forms += fmt::format("{}{}", forms.empty() ? "" : " | ", h.usage);
    return fail(fmt::format("{}: {}; usage: {}", phrase, problem, forms));
}

ParseResult parse_show(const Words& w, Command c) {
    const std::string_view what = w.size() > 1 ? w[1] : std::string_view();
    if (what == "info" || what == "stats" || what == "routes") {
        if (w.size() > 2)
            return usage(fmt::format("show {}", what), "too many arguments");
        c.verb = what == "info"    ? Verb::ShowInfo
                 : what == "stats" ? Verb::ShowStats
                                   : Verb::ShowRoutes;
        return ok(std::move(c));
    }
    if (what == "members") {
        if (w.size() > 3)
            return usage("show members", "too many arguments");
        c.verb = Verb::ShowMembers;
        if (w.size() == 3)
            c.route = w[2];
        return ok(std::move(c));
    }
    if (what == "connections") {
        c.verb = Verb::ShowConnections;
        std::size_t i = 2;
        // ROUTE and MEMBER before `limit N`; a route named "limit" is written last.
        std::vector<std::string_view> names;
        while (i < w.size()) {
            if (w[i] == "limit" && i + 1 < w.size() && i + 2 == w.size()) {
                const auto n = number(w[i + 1], kMaxConnectionLimit);
                if (!n || *n == 0)
                    return usage("show connections",
                                 fmt::format("limit must be 1..{}, not {}", kMaxConnectionLimit,
                                             quote_input(w[i + 1])));
                c.limit = static_cast<std::size_t>(*n);
                break;
            }
            names.push_back(w[i]);
            ++i;
        }
        if (names.size() > 2)
            return usage("show connections", "too many arguments");
        if (!names.empty())
            c.route = names[0];
        if (names.size() > 1)
            c.member = names[1];
        return ok(std::move(c));
    }
    return unknown(w);
}

ParseResult parse_set(const Words& w, Command c) {
    if (w.size() < 2 || w[1] != "member")
        return unknown(w);
    if (w.size() != 6)
        return usage("set member", w.size() < 6 ? "missing arguments" : "too many arguments");
    c.route = w[2];
    c.member = w[3];
    if (w[4] == "state") {
        if (w[5] != "ready" && w[5] != "drain" && w[5] != "maint")
            return usage("set member", fmt::format("state must be ready, drain or maint, not {}",
                                                   quote_input(w[5])));
        c.verb = Verb::SetMemberState;
        c.state = w[5];
        return ok(std::move(c));
    }
    if (w[4] == "weight") {
        const auto n = number(w[5], kMaxWeight);
        if (!n || *n == 0)
            return usage("set member", fmt::format("weight must be 1..{}, not {}", kMaxWeight,
                                                   quote_input(w[5])));
        c.verb = Verb::SetMemberWeight;
        c.weight = static_cast<unsigned>(*n);
        return ok(std::move(c));
    }
    return usage("set member", fmt::format("{} is neither state nor weight", quote_input(w[4])));
}

ParseResult parse_member_change(const Words& w, Command c) {
    if (w.size() < 2 || w[1] != "member")
        return unknown(w);
    const std::string phrase = fmt::format("{} member", w[0]);
    if (w.size() < 4)
        return usage(phrase, "missing arguments");
    c.route = w[2];
    c.member = w[3];
    if (w[0] == "del") {
        if (w.size() > 4)
            return usage(phrase, "too many arguments");
        c.verb = Verb::DelMember;
        return ok(std::move(c));
    }
    c.verb = Verb::AddMember;
    for (std::size_t i = 4; i < w.size(); ++i) {
        if (w[i] == "backup" && !c.backup) {
            c.backup = true;
        } else if (w[i] == "weight" && !c.weight && i + 1 < w.size()) {
            const auto n = number(w[i + 1], kMaxWeight);
            if (!n || *n == 0)
                return usage(phrase, fmt::format("weight must be 1..{}, not {}", kMaxWeight,
                                                 quote_input(w[i + 1])));
            c.weight = static_cast<unsigned>(*n);
            ++i;
        } else {
            return usage(phrase, fmt::format("unexpected {}", quote_input(w[i])));
        }
    }
    return ok(std::move(c));
}

ParseResult parse_close(const Words& w, Command c) {
    const std::string_view what = w.size() > 1 ? w[1] : std::string_view();
    if (what == "connection") {
        if (w.size() != 3)
            return usage("close connection",
                         w.size() < 3 ? "missing arguments" : "too many arguments");
        const auto id = number(w[2], UINT64_MAX);
        if (!id)
            return usage("close connection", fmt::format("ID must be a connection's number, not {}",
                                                         quote_input(w[2])));
        c.verb = Verb::CloseConnection;
        c.id = *id;
        return ok(std::move(c));
    }
    if (what == "connections") {
        if (w.size() < 3 || w.size() > 4)
            return usage("close connections",
                         w.size() < 3 ? "missing arguments" : "too many arguments");
        c.verb = Verb::CloseConnections;
        c.route = w[2];
        if (w.size() == 4)
            c.member = w[3];
        return ok(std::move(c));
    }
    return unknown(w);
}

ParseResult parse_move(const Words& w, Command c) {
    if (w.size() < 2 || w[1] != "connection")
        return unknown(w);
    if (w.size() != 4)
        return usage("move connection", w.size() < 4 ? "missing arguments" : "too many arguments");
    const auto id = number(w[2], UINT64_MAX);
    if (!id)
        return usage("move connection",
                     fmt::format("ID must be a connection's number, not {}", quote_input(w[2])));
    const auto shard = number(w[3], UINT16_MAX);
    if (!shard)
        return usage("move connection",
                     fmt::format("SHARD must be a shard's number, not {}", quote_input(w[3])));
    c.verb = Verb::MoveConnection;
    c.id = *id;
    c.shard = static_cast<unsigned>(*shard);
    return ok(std::move(c));
}

} // namespace

ParseResult parse_command(std::string_view line) {
    if (!line.empty() && line.back() == '\r')
        line.remove_suffix(1);
    std::optional<Words> split = split_words(line);
    if (!split)
        return fail(fmt::format("more than {} words", kMaxWords));
    Words& w = *split;
    if (w.empty())
        return fail("empty command (try help)");
    Command c;
    if (w.size() > 1 && w.back() == "json") {
        c.json = true;
        w.pop_back();
    }
    if (w[0] == "help") {
        if (w.size() > 1)
            return usage("help", "too many arguments");
        c.verb = Verb::Help;
        return ok(std::move(c));
    }
    if (w[0] == "show")
        return parse_show(w, std::move(c));
    if (w[0] == "set")
        return parse_set(w, std::move(c));
    if (w[0] == "add" || w[0] == "del")
        return parse_member_change(w, std::move(c));
    if (w[0] == "close")
        return parse_close(w, std::move(c));
    if (w[0] == "move")
        return parse_move(w, std::move(c));
    if (w[0] == "rebalance") {
        if (w.size() > 1)
            return usage("rebalance", "too many arguments");
        c.verb = Verb::Rebalance;
        return ok(std::move(c));
    }
    return unknown(w);
}

const std::vector<CommandHelp>& command_help() {
    return kHelp;
}

} // namespace uringfwd::cli::control
