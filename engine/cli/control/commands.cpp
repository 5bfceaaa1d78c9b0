#include "cli/control/commands.hpp"

#include "cli/control/json_object.hpp"
#include "cli/control/member_commands.hpp"
#include "uringfwd/route.hpp"
#include "uringfwd/version.hpp"

#include <fmt/format.h>

#include <time.h>
#include <unistd.h>

#include <algorithm>

namespace uringfwd::cli::control {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;
using std::chrono::seconds;

// "2026-12-02T06:00:00Z".
std::string utc_time(std::chrono::system_clock::time_point when) {
    const time_t t = std::chrono::system_clock::to_time_t(when);
    tm parts{};
    ::gmtime_r(&t, &parts);
    char buffer[32];
    std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &parts);
    return buffer;
}

// "auto", or "splice,copy" when shards fell back differently.
std::string data_paths(const EngineInfo& info) {
    std::vector<std::string_view> seen;
    for (const ShardInfo& shard : info.shards)
        if (std::find(seen.begin(), seen.end(), to_string(shard.data_path)) == seen.end())
            seen.push_back(to_string(shard.data_path));
    std::string out;
    for (std::string_view s : seen)
        out += fmt::format("{}{}", out.empty() ? "" : ",", s);
    return out;
}

// A reply of `name value` lines, or one JSON object of the same pairs.
class Pairs {
public:
    explicit Pairs(bool json) : json_(json) {}
    void text(std::string_view name, std::string_view value) {
        if (json_)
            object_.text(name, value);
        else
            fmt::format_to(std::back_inserter(lines_), "{} {}\n", name, value);
    }
    void number(std::string_view name, uint64_t value) {
        if (json_)
            object_.number(name, value);
        else
            fmt::format_to(std::back_inserter(lines_), "{} {}\n", name, value);
    }
    void decimal(std::string_view name, double value) {
        const std::string shown = fmt::format("{:.2f}", value);
        if (json_)
            object_.raw(name, shown);
        else
            fmt::format_to(std::back_inserter(lines_), "{} {}\n", name, shown);
    }
    Reply done() { return Reply{false, json_ ? object_.done() + '\n' : lines_}; }

private:
    bool json_;
    JsonObject object_;
    std::string lines_;
};

Reply show_info(const Command& c, Engine& engine, const ProcessFacts& facts) {
    const EngineInfo info = engine.info();
    const EngineStats stats = engine.stats();
    Pairs out(c.json);
    out.text("version", version());
    out.number("pid", static_cast<uint64_t>(::getpid()));
    out.text("started", utc_time(facts.started_at));
    out.number(
        "uptime_seconds",
        static_cast<uint64_t>(
            duration_cast<seconds>(std::chrono::steady_clock::now() - facts.started).count()));
    out.number("shards", info.shards.size());
    out.text("data_path", data_paths(info));
    out.number("routes", info.routes.size());
    out.number("connections_open", stats.active);
    out.text("config_file", facts.config_file.empty() ? "-" : facts.config_file);
    const int64_t loaded = facts.config_loaded_ms.load();
    out.text("config_loaded",
             facts.config_file.empty()
                 ? std::string("-")
                 : utc_time(std::chrono::system_clock::time_point(
                       duration_cast<std::chrono::system_clock::duration>(milliseconds(loaded)))));
    return out.done();
}

Reply show_stats(const Command& c, Engine& engine) {
    const EngineStats stats = engine.stats();
    Pairs out(c.json);
    stats.for_each([&](const CounterInfo& info, uint64_t value) { out.number(info.name, value); });
    out.decimal("cqes_per_enter", stats.completions_per_enter());
    return out.done();
}

std::string join(const std::vector<std::string>& parts) {
    std::string out;
    for (const std::string& p : parts)
        out += fmt::format("{}{}", out.empty() ? "" : ",", p);
    return out.empty() ? "-" : out;
}

Reply show_routes(const Command& c, Engine& engine) {
    const EngineInfo info = engine.info();
    const std::vector<RouteStats> stats = engine.route_stats();
    std::string text;
    std::vector<std::string> objects;
    for (const RouteInfo& route : info.routes) {
        std::vector<std::string> listen;
        for (const Endpoint& e : route.listen)
            listen.push_back(e.to_string());
        RouteStats counts;
        const auto found = std::find_if(stats.begin(), stats.end(),
                                        [&](const RouteStats& s) { return s.name == route.name; });
        if (found != stats.end())
            counts = *found;
        if (c.json) {
            objects.push_back(JsonObject()
                                  .text("route", route.name)
                                  .raw("listen", json_strings(listen))
                                  .text("balance", to_string(route.balance))
                                  .raw("members", json_strings(route.members))
                                  .number("active", counts.active)
                                  .number("accepted", counts.accepted)
                                  .number("waiting", counts.waiting)
                                  .done());
        } else {
            fmt::format_to(std::back_inserter(text),
                           "route={} listen={} balance={} members={} active={} accepted={} "
                           "waiting={}\n",
                           route.name, join(listen), to_string(route.balance), join(route.members),
                           counts.active, counts.accepted, counts.waiting);
        }
    }
    if (c.json)
        return Reply{false, json_array(objects) + '\n'};
    return Reply{false, text};
}

Reply help(const Command& c) {
    std::string text;
    std::vector<std::string> objects;
    std::size_t width = 0;
    for (const CommandHelp& h : command_help())
        width = std::max(width, h.usage.size());
    for (const CommandHelp& h : command_help()) {
        if (c.json)
            objects.push_back(
                JsonObject().text("usage", h.usage).text("summary", h.summary).done());
        else
            fmt::format_to(std::back_inserter(text), "{:<{}}  {}\n", h.usage, width, h.summary);
    }
    if (c.json)
        return Reply{false, json_array(objects) + '\n'};
    text += "Any command ending in \"json\" replies as JSON.\n";
    return Reply{false, text};
}

} // namespace

Reply run_command(const Command& c, Engine& engine, const ProcessFacts& facts) {
    switch (c.verb) {
    case Verb::Help:
        return help(c);
    case Verb::ShowInfo:
        return show_info(c, engine, facts);
    case Verb::ShowStats:
        return show_stats(c, engine);
    case Verb::ShowRoutes:
        return show_routes(c, engine);
    case Verb::ShowMembers:
        return show_members(c, engine);
    case Verb::ShowConnections:
        return show_connections(c, engine);
    case Verb::SetMemberState:
    case Verb::SetMemberWeight:
    case Verb::AddMember:
    case Verb::DelMember:
    case Verb::CloseConnection:
    case Verb::CloseConnections:
    case Verb::MoveConnection:
    case Verb::Rebalance:
        return change(c, engine);
    }
    return error_reply("unknown command");
}

} // namespace uringfwd::cli::control
