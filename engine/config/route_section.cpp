#include "config/route_section.hpp"

#include "api/route_checks.hpp"
#include "config/access_keys.hpp"
#include "config/socket_controls_section.hpp"
#include "config/table_reader.hpp"
#include "routing/sni_router.hpp"
#include "support/quote_input.hpp"
#include "uringfwd/config_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <stdexcept>
#include <utility>

namespace uringfwd::config {
namespace {

using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using namespace std::chrono_literals;

constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();
constexpr std::size_t kLongestName = 64;

// Names show up in logs and will label metrics, so they are kept to one plain word.
bool valid_name(const std::string& name) {
    return !name.empty() && name.size() <= kLongestName &&
           std::all_of(name.begin(), name.end(), [](char c) {
               return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '_' || c == '.';
           });
}

// Reads `name` and sets how later messages name the route.
void read_name(const toml::table& table, std::size_t index, ErrorList& errors, ParsedRoute& out) {
    out.label = fmt::format("route #{}", index);
    TableReader reader(table, errors, out.label + ": ", "", "");
    const auto name = reader.string("name");
    if (!name) {
        if (reader.get("name") == nullptr)
            reader.error(reader.line(), "name is required");
        return;
    }
    if (!valid_name(*name)) {
        reader.error(line_of(*reader.get("name")),
                     fmt::format("name must be 1..{} letters, digits, '-', '_' or '.', not {}",
                                 kLongestName, quote_input(*name)));
        return;
    }
    out.route.name = *name;
    out.label = fmt::format("route \"{}\"", *name);
    out.named = true;
    out.name_line = line_of(*reader.get("name"));
}

bool is_unix_path(const Endpoint& e) {
    return e.is_unix() && !e.host.empty() && e.host.front() != '@';
}

// mode = "0660" (TableReader::file_mode()).
void read_mode(TableReader& reader, UnixSocketAccess& access) {
    if (const auto mode = reader.file_mode("mode"))
        access.mode = *mode;
}

// user = "www-data" or group = "www-data" (names or numeric ids).
void read_account(TableReader& reader, std::string_view key, std::string& out) {
    const auto value = reader.string(key);
    if (!value)
        return;
    if (value->empty())
        reader.wrong(key, *reader.get(key), "a user or group name, or a number");
    else
        out = *value;
}

// A listen entry: an address, or an inline table with one and, for a Unix path, who
// may connect to its socket file: { address = "unix:/run/a.sock", mode = "0660",
// group = "www-data" }.
void add_listen(TableReader& reader, const std::string& context, ErrorList& errors,
                const toml::node& node, ParsedRoute& out) {
    const std::size_t line = line_of(node);
    std::optional<std::string> text;
    UnixSocketAccess access;
    if (node.is_string()) {
        text = node.as_string()->get();
    } else if (node.is_table()) {
        TableReader entry(*node.as_table(), errors, context, "listen ",
                          "in a listen table (address, mode, user, group)");
        text = entry.string("address");
        if (!text && entry.get("address") == nullptr)
            entry.error(line, "address is required in a listen table");
        read_mode(entry, access);
        read_account(entry, "user", access.user);
        read_account(entry, "group", access.group);
        entry.report_unknown_keys();
    } else {
        reader.wrong("listen", node,
                     "an address, or a table such as { address = \"unix:/run/a.sock\", mode = "
                     "\"0660\" }");
        return;
    }
    if (!text)
        return;
    try {
        Endpoint e = Endpoint::parse(*text);
        if (!access.empty() && !is_unix_path(e)) {
            reader.error(line, fmt::format("listen {}: mode, user and group are for unix: "
                                           "paths only (a file to set them on)",
                                           quote_input(*text)));
            return;
        }
        out.route.listen.push_back(std::move(e));
        out.route.listen_access.push_back(access);
        out.listen_lines.push_back(line);
    } catch (const std::invalid_argument& e) {
        reader.error(line, fmt::format("listen: {}", e.what()));
    }
}

// listen: one address, or an array of them; each a string or a table.
void read_listen(TableReader& reader, const std::string& context, ErrorList& errors,
                 ParsedRoute& out) {
    const toml::node* listen = reader.get("listen");
    if (listen == nullptr) {
        reader.error(reader.line(), "listen is required: an address, or an array of them");
        return;
    }
    if (listen->is_array()) {
        const toml::array& all = *listen->as_array();
        if (all.empty())
            reader.error(line_of(*listen), "listen must hold at least one address");
        for (const toml::node& one : all)
            add_listen(reader, context, errors, one, out);
        return;
    }
    if (!listen->is_string() && !listen->is_table()) {
        reader.wrong("listen", *listen, "an address or an array of addresses");
        return;
    }
    add_listen(reader, context, errors, *listen, out);
}

// server_names and alpn: arrays of strings, each checked on its own line.
void read_names(TableReader& reader, const char* key, std::vector<std::string>& out,
                std::optional<std::string> (*check)(std::string_view)) {
    const toml::node* node = reader.get(key);
    if (node == nullptr)
        return;
    const toml::array* all = node->as_array();
    if (all == nullptr || all->empty()) {
        reader.wrong(key, *node, "a non-empty array of strings");
        return;
    }
    for (const toml::node& one : *all) {
        if (!one.is_string()) {
            reader.wrong(key, one, "a string");
            continue;
        }
        const std::string& value = one.as_string()->get();
        if (auto why = check(value))
            reader.error(line_of(one), fmt::format("{} {}: {}", key, quote_input(value), *why));
        else
            out.push_back(value);
    }
}

UpstreamMember read_upstream(const toml::table& table, const std::string& context,
                             ErrorList& errors) {
    TableReader reader(table, errors, context, "upstream ", "in [[route.upstream]]");
    UpstreamMember member;
    if (const auto address = reader.string("address")) {
        const std::size_t line = line_of(*reader.get("address"));
        try {
            member.address = Endpoint::parse(*address);
            if (!member.address.is_unix() && member.address.port == 0)
                reader.error(line, fmt::format("address {} needs a port (0 is for listening only)",
                                               quote_input(*address)));
        } catch (const std::invalid_argument& e) {
            reader.error(line, fmt::format("address: {}", e.what()));
        }
    } else if (reader.get("address") == nullptr) {
        reader.error(reader.line(), "address is required");
    }
    if (const auto name = reader.string("name")) {
        if (valid_name(*name))
            member.name = *name;
        else
            reader.error(line_of(*reader.get("name")),
                         fmt::format("name must be 1..{} letters, digits, '-', '_' or '.', not {}",
                                     kLongestName, quote_input(*name)));
    }
    if (const auto v = reader.integer("weight", 1, 1000))
        member.weight = static_cast<unsigned>(*v);
    if (const auto v = reader.boolean("backup"))
        member.backup = *v;
    if (const auto v = reader.integer("max_connections", 0, kNoLimit))
        member.max_connections = static_cast<std::size_t>(*v);
    if (const auto v = reader.one_of("send_proxy", {"off", "v1", "v2"}))
        member.send_proxy = parse_proxy_version(*v);
    if (const auto v = reader.duration("slow_start", 0us, microseconds{1h}))
        member.slow_start = duration_cast<milliseconds>(*v);
    read_source(reader, member.source);
    if (!member.source.empty() && member.address.is_unix())
        reader.error(line_of(*reader.get("source")),
                     "source is for TCP upstreams, not a Unix socket");
    for (const auto& [key, field] :
         {std::pair{"mptcp", &member.mptcp}, std::pair{"fastopen", &member.fastopen}}) {
        const auto v = reader.boolean(key);
        if (!v)
            continue;
        *field = *v;
        if (*v && member.address.is_unix())
            reader.error(line_of(*reader.get(key)),
                         fmt::format("{} is for TCP upstreams, not a Unix socket", key));
    }
    reader.report_unknown_keys();
    return member;
}

void read_upstreams(TableReader& reader, const std::string& context, ErrorList& errors,
                    UpstreamPool& pool, std::vector<std::size_t>& lines) {
    const toml::node* node = reader.get("upstream");
    const toml::array* all = reader.array_of_tables("upstream", "[[route.upstream]]");
    if (node == nullptr || (all != nullptr && all->empty())) {
        reader.error(node ? line_of(*node) : reader.line(),
                     "needs at least one upstream ([[route.upstream]] with an address)");
        return;
    }
    if (all == nullptr)
        return; // the wrong type is reported already
    // Each member's label (its name, or its address as written) is one series of the
    // metrics: two alike would be two samples of one series, which Prometheus refuses.
    std::map<std::string, std::size_t> labels;
    for (const toml::node& one : *all) {
        const toml::table& table = *one.as_table();
        const toml::node* address = table.get("address");
        const toml::node* name = table.get("name");
        lines.push_back(line_of(address != nullptr ? *address : one));
        UpstreamMember member = read_upstream(table, context, errors);
        if (address != nullptr && address->is_string()) {
            const std::string label =
                member.name.empty() ? member.address.to_string() : member.name;
            const std::size_t line = member.name.empty() ? lines.back() : line_of(*name);
            const auto [first, added] = labels.emplace(label, line);
            if (!added && member.name.empty())
                reader.error(line, fmt::format("upstream {} is listed twice (first at line {}); "
                                               "give each a name to connect to one address twice",
                                               quote_input(label), first->second));
            else if (!added)
                reader.error(line, fmt::format("upstream name {} is used twice (first at line {})",
                                               quote_input(label), first->second));
        }
        pool.members.push_back(std::move(member));
    }
    if (std::all_of(pool.members.begin(), pool.members.end(),
                    [](const UpstreamMember& m) { return m.backup; }))
        reader.error(line_of(*node),
                     "every upstream is a backup; at least one must not be (backups serve "
                     "only while no other member is up)");
}

// Calls `take` with each string of the array `key` and its line; reports other types.
template <typename F> void each_string(TableReader& reader, std::string_view key, F&& take) {
    const toml::node* node = reader.get(key);
    if (node == nullptr)
        return;
    if (!node->is_array()) {
        reader.wrong(key, *node, "an array of strings");
        return;
    }
    for (const toml::node& one : *node->as_array()) {
        if (!one.is_string())
            reader.wrong(key, one, "an array of strings");
        else
            take(one.as_string()->get(), line_of(one));
    }
}

// accept_proxy, trusted_sources, proxy_tlvs, send_proxy (README "PROXY protocol").
void read_proxy_protocol(TableReader& reader, RouteConfig& route) {
    if (const auto v = reader.boolean("accept_proxy"))
        route.accept_proxy = *v;
    if (const auto v = reader.one_of("send_proxy", {"off", "v1", "v2"}))
        route.send_proxy = *parse_proxy_version(*v);
    read_cidr_list(reader, "trusted_sources", route.trusted_sources, "an array of strings",
                   "an array of strings");
    each_string(reader, "proxy_tlvs", [&](const std::string& text, std::size_t line) {
        if (auto type = parse_proxy_tlv_type(text))
            route.proxy_tlvs.push_back(*type);
        else
            reader.error(line, fmt::format("proxy_tlvs: {} is not \"alpn\", \"authority\", "
                                           "\"unique_id\", \"ssl\", \"netns\" or a number 0..255",
                                           quote_input(text)));
    });
    const toml::node* trusted = reader.get("trusted_sources");
    const toml::node* tlvs = reader.get("proxy_tlvs");
    for (const toml::node* set : {trusted, tlvs})
        if (set != nullptr && !route.accept_proxy)
            reader.error(line_of(*set),
                         fmt::format("{} needs accept_proxy = true",
                                     set == trusted ? "trusted_sources" : "proxy_tlvs"));
}

void read_health_check(TableReader& route, const std::string& context, ErrorList& errors,
                       HealthCheck& check) {
    const toml::table* table = route.table("health_check");
    if (table == nullptr)
        return;
    TableReader reader(*table, errors, context, "health_check ", "in [route.health_check]");
    // The table's presence turns checks on; `enabled = false` keeps the settings but off.
    check.enabled = reader.boolean("enabled").value_or(true);
    if (const auto v = reader.duration("interval", 1ms, microseconds{1h}))
        check.interval = duration_cast<milliseconds>(*v);
    if (const auto v = reader.duration("timeout", 1ms, microseconds{1h}))
        check.timeout = duration_cast<milliseconds>(*v);
    if (const auto v = reader.integer("rise", 1, 100))
        check.rise = static_cast<unsigned>(*v);
    if (const auto v = reader.integer("fall", 1, 100))
        check.fall = static_cast<unsigned>(*v);
    if (const auto v = reader.string("send"))
        check.send = *v;
    if (const auto v = reader.string("expect"))
        check.expect = *v;
    reader.report_unknown_keys();
}

void read_passive_health(TableReader& route, const std::string& context, ErrorList& errors,
                         PassiveHealth& passive) {
    const toml::table* table = route.table("passive_health");
    if (table == nullptr)
        return;
    TableReader reader(*table, errors, context, "passive_health ", "in [route.passive_health]");
    if (const auto v = reader.integer("fall", 0, 100))
        passive.fall = static_cast<unsigned>(*v);
    if (const auto v = reader.duration("backoff", 1ms, microseconds{1h}))
        passive.backoff = duration_cast<milliseconds>(*v);
    const auto max_backoff = reader.duration("max_backoff", 1ms, microseconds{24h});
    if (max_backoff)
        passive.max_backoff = duration_cast<milliseconds>(*max_backoff);
    // Doubling from backoff stops at max_backoff: one below the other is a mistake.
    if (passive.max_backoff < passive.backoff) {
        const toml::node* at = reader.get("max_backoff");
        reader.error(at ? line_of(*at) : reader.line(),
                     fmt::format("max_backoff ({}) must not be below backoff ({})",
                                 format_duration(passive.max_backoff),
                                 format_duration(passive.backoff)));
    }
    reader.report_unknown_keys();
}

// on_member_down and slow_start (README "Runtime control"); after the upstreams, whose
// own slow_start Maglev refuses too.
void read_member_lifecycle(TableReader& reader, RouteConfig& route) {
    if (const auto v = reader.one_of("on_member_down", {"keep", "close"}))
        route.on_member_down = *parse_on_member_down(*v);
    if (const auto v = reader.duration("slow_start", 0us, microseconds{1h}))
        route.slow_start = duration_cast<milliseconds>(*v);
    if (const std::string problem = slow_start_problem(route); !problem.empty()) {
        const toml::node* at = reader.get("slow_start");
        reader.error(at ? line_of(*at) : reader.line(), problem);
    }
}

} // namespace

ParsedRoute read_route(const toml::table& table, std::size_t index, ErrorList& errors) {
    ParsedRoute out;
    out.line = line_of(table);
    read_name(table, index, errors, out);
    const std::string context = out.label + ": ";
    TableReader reader(table, errors, context, "", "in [[route]]");
    reader.get("name"); // read above; known

    read_listen(reader, context, errors, out);
    UpstreamPool& pool = out.route.pool;
    if (const auto v = reader.one_of("balance", {"round-robin", "least-active", "maglev"}))
        pool.balance = *parse_balance_policy(*v);
    if (const auto v = reader.duration("connect_timeout", 1ms, microseconds{1h}))
        pool.connect_timeout = duration_cast<milliseconds>(*v);
    if (const auto v = reader.duration("connect_deadline", 0us, microseconds{24h}))
        pool.connect_deadline = duration_cast<milliseconds>(*v);
    if (const auto v = reader.integer("retries", 0, 100))
        pool.retries = static_cast<unsigned>(*v);
    if (const auto v = reader.integer("max_connections", 0, kNoLimit))
        out.route.max_connections = static_cast<std::size_t>(*v);
    if (const auto v = reader.boolean("dual_stack"))
        out.route.dual_stack = *v;
    if (const auto v = reader.boolean("mptcp"))
        out.route.mptcp = *v;
    if (const auto v = reader.boolean("fastopen"))
        out.route.fastopen = *v;
    if (const auto v = reader.boolean("transparent"))
        out.route.transparent = *v;
    if (const auto v = reader.duration("idle_timeout", 0us, std::nullopt))
        out.route.idle_timeout = duration_cast<milliseconds>(*v);
    if (const auto v = reader.duration("max_duration", 0us, std::nullopt))
        out.route.max_duration = duration_cast<milliseconds>(*v);
    if (const auto v = reader.duration("resolve_interval", 0us, std::nullopt))
        pool.resolve_interval = duration_cast<milliseconds>(*v);
    read_names(reader, "server_names", out.route.server_names, engine::check_server_name);
    read_names(reader, "alpn", out.route.alpn, engine::check_alpn);
    if (const toml::node* node = reader.get("server_names"))
        out.tls_line = line_of(*node);
    else if (const toml::node* alpn = reader.get("alpn"))
        out.tls_line = line_of(*alpn);
    if (const auto v = reader.duration("inspect_timeout", 1ms, microseconds{1h}))
        out.route.inspect_timeout = duration_cast<milliseconds>(*v);
    read_proxy_protocol(reader, out.route);
    read_access_lists(reader, out.route.allow, out.route.deny);
    read_source_limits(reader, out.route);
    read_upstreams(reader, context, errors, pool, out.member_lines);
    read_health_check(reader, context, errors, pool.health_check);
    read_passive_health(reader, context, errors, pool.passive);
    read_member_lifecycle(reader, out.route);
    read_socket_controls(reader, context, errors, out.route);

    reader.report_unknown_keys();
    return out;
}

} // namespace uringfwd::config
