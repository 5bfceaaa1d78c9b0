#include "cli/control/member_commands.hpp"

#include "cli/control/json_object.hpp"
#include "uringfwd/messages.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace uringfwd::cli::control {
namespace {

// A reply of one line per item, or one JSON array of objects.
class Rows {
public:
    explicit Rows(bool json) : json_(json) {}
    void add(std::string line, std::string object) {
        if (json_)
            objects_.push_back(std::move(object));
        else
            text_ += line + '\n';
    }
    Reply done() const { return Reply{false, json_ ? json_array(objects_) + '\n' : text_}; }

private:
    bool json_;
    std::string text_;
    std::vector<std::string> objects_;
};

// An address shown in a key=value line: "-" when there is none yet.
std::string shown(const std::string& text) {
    return text.empty() ? "-" : text;
}

Reply done(const Command& c, const ChangeResult& result, std::string what) {
    if (!result.ok)
        return error_reply(result.error);
    if (c.json)
        return Reply{false, JsonObject().boolean("ok", true).text("done", what).done() + '\n'};
    return Reply{false, what + '\n'};
}

} // namespace

Reply show_members(const Command& c, Engine& engine) {
    const std::vector<MemberInfo> members = engine.members(c.route);
    if (members.empty() && !c.route.empty())
        return error_reply(fmt::format("no route named {}", quote_input(c.route)));
    Rows out(c.json);
    for (const MemberInfo& m : members)
        out.add(fmt::format("route={} member={} address={} backup={} state={} source={} "
                            "health={} weight={} effective_weight={} open={} connects={} "
                            "failures={}",
                            m.route, m.member, m.address, m.backup ? "yes" : "no",
                            to_string(m.state), m.state_source, to_string(m.health), m.weight,
                            m.effective_weight, m.open, m.connects, m.failures),
                JsonObject()
                    .text("route", m.route)
                    .text("member", m.member)
                    .text("address", m.address)
                    .boolean("backup", m.backup)
                    .text("state", to_string(m.state))
                    .text("source", m.state_source)
                    .text("health", to_string(m.health))
                    .number("weight", m.weight)
                    .number("effective_weight", m.effective_weight)
                    .number("open", m.open)
                    .number("connects", m.connects)
                    .number("failures", m.failures)
                    .done());
    return out.done();
}

Reply show_connections(const Command& c, Engine& engine) {
    ConnectionFilter filter;
    filter.route = c.route;
    filter.member = c.member;
    filter.limit = c.limit == 0 ? kDefaultConnectionLimit : c.limit;
    Rows out(c.json);
    for (const OpenConnection& o : engine.connections(filter))
        out.add(fmt::format("id={} route={} client={} member={} upstream={} shard={} age_ms={} "
                            "bytes_to_upstream={} bytes_to_client={} phase={}",
                            o.id, o.route, shown(o.client), shown(o.member), shown(o.upstream),
                            o.shard, o.age.count(), o.bytes_to_upstream, o.bytes_to_client,
                            o.phase),
                JsonObject()
                    .number("id", o.id)
                    .text("route", o.route)
                    .text("client", o.client)
                    .text("member", o.member)
                    .text("upstream", o.upstream)
                    .number("shard", o.shard)
                    .number("age_ms", static_cast<uint64_t>(o.age.count()))
                    .number("bytes_to_upstream", o.bytes_to_upstream)
                    .number("bytes_to_client", o.bytes_to_client)
                    .text("phase", o.phase)
                    .done());
    return out.done();
}

Reply change(const Command& c, Engine& engine) {
    switch (c.verb) {
    case Verb::SetMemberState: {
        const std::optional<MemberState> state = parse_member_state(c.state);
        if (!state) // the parser let only ready, drain and maint through
            return error_reply(fmt::format("no state {}", quote_input(c.state)));
        return done(c, engine.set_member_state(c.route, c.member, *state),
                    fmt::format("route {} member {}: state {}", c.route, c.member, c.state));
    }
    case Verb::SetMemberWeight:
        return done(
            c, engine.set_member_weight(c.route, c.member, c.weight.value_or(1)),
            fmt::format("route {} member {}: weight {}", c.route, c.member, c.weight.value_or(1)));
    case Verb::AddMember: {
        UpstreamMember member;
        try {
            member.address = Endpoint::parse(c.member);
        } catch (const std::invalid_argument& e) {
            return error_reply(fmt::format("add member: {}: {}", quote_input(c.member), e.what()));
        }
        member.weight = c.weight.value_or(1);
        member.backup = c.backup;
        return done(c, engine.add_member(c.route, member),
                    fmt::format("route {}: member {} added (weight {}{})", c.route, c.member,
                                member.weight, member.backup ? ", backup" : ""));
    }
    case Verb::DelMember:
        return done(c, engine.remove_member(c.route, c.member),
                    fmt::format("route {}: member {} removed; its open connections go on", c.route,
                                c.member));
    case Verb::CloseConnection:
        return done(c, engine.close_connection(c.id), fmt::format("connection {} closed", c.id));
    case Verb::CloseConnections: {
        if (engine.members(c.route).empty())
            return error_reply(fmt::format("no route named {}", quote_input(c.route)));
        const std::size_t n = engine.close_connections(c.route, c.member);
        return done(c, ChangeResult{true, {}}, fmt::format("closed {}", count_of(n, "connection")));
    }
    case Verb::MoveConnection:
        return done(c, engine.move_connection(c.id, c.shard),
                    fmt::format("connection {} moving to shard {}", c.id, c.shard));
    case Verb::Rebalance: {
        const std::size_t n = engine.rebalance();
        return done(c, ChangeResult{true, {}},
                    fmt::format("moving {} between shards", count_of(n, "connection")));
    }
    default:
        break;
    }
    return error_reply("not a change");
}

} // namespace uringfwd::cli::control
