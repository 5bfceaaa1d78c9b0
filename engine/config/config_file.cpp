// The file as a whole: TOML syntax, the top-level tables, and the checks that span
// routes (unique names; listen addresses shared only by routes that TLS tells apart). The sections
// are read by engine_section.cpp and route_section.cpp.
#include "uringfwd/config_file.hpp"

#include "config/engine_section.hpp"
#include "config/error_list.hpp"
#include "config/name_check.hpp"
#include "config/route_section.hpp"
#include "config/table_reader.hpp"
#include "routing/sni_router.hpp"
#include "support/quote_input.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <toml++/toml.h>

namespace uringfwd {
namespace {

using config::ErrorList;
using config::ParsedRoute;

// Far above any real configuration; keeps a mistaken path (a log, a device) from being
// read whole before it fails to parse.
constexpr off_t kLargestFile = 16 << 20;

void check_unique_names(const std::vector<ParsedRoute>& routes, ErrorList& errors) {
    std::map<std::string, const ParsedRoute*> seen;
    for (const ParsedRoute& r : routes) {
        if (!r.named)
            continue;
        const auto [it, inserted] = seen.emplace(r.route.name, &r);
        if (!inserted)
            errors.add(r.name_line, fmt::format("{}: name is already used by the route at line {}",
                                                r.label, it->second->line));
    }
}

// A route listing one address twice is a mistake. Several routes may share an address:
// they are then told apart by the TLS ClientHello (server_names, alpn), and must not be
// ambiguous (routing/sni_router.hpp). Port 0 is never shared: each such listener gets a
// port of its own.
void check_listeners(const std::vector<ParsedRoute>& routes, ErrorList& errors) {
    struct Member {
        const ParsedRoute* route;
        std::size_t line;
    };
    struct Group {
        std::string address;
        std::vector<Member> members;
        // Its first route's: one socket, set up one way.
        UnixSocketAccess access;
        bool dual_stack = false; // IPv6 addresses only
    };
    std::vector<Group> groups;
    for (const ParsedRoute& r : routes) {
        for (std::size_t i = 0; i < r.route.listen.size(); ++i) {
            const Endpoint& e = r.route.listen[i];
            const std::string address = e.to_string();
            const bool own_port = !e.is_unix() && e.port == 0;
            auto group = std::find_if(groups.begin(), groups.end(), [&](const Group& g) {
                return !own_port && g.address == address;
            });
            const UnixSocketAccess access =
                i < r.route.listen_access.size() ? r.route.listen_access[i] : UnixSocketAccess{};
            const bool dual_stack = r.route.dual_stack && e.kind == Endpoint::Kind::Inet6;
            if (group == groups.end()) {
                groups.push_back({address, {{&r, r.listen_lines[i]}}, access, dual_stack});
                continue;
            }
            auto same = std::find_if(group->members.begin(), group->members.end(),
                                     [&](const Member& m) { return m.route == &r; });
            if (same != group->members.end()) {
                errors.add(r.listen_lines[i],
                           fmt::format("{}: listen address {} is listed twice (first at line {})",
                                       r.label, quote_input(address), same->line));
                continue;
            }
            if (!(access == group->access) || dual_stack != group->dual_stack)
                errors.add(r.listen_lines[i],
                           fmt::format("{}: listen address {} is set up otherwise (mode, user, "
                                       "group, dual_stack) by {} at line {}, which shares it",
                                       r.label, quote_input(address),
                                       group->members.front().route->label,
                                       group->members.front().line));
            group->members.push_back({&r, r.listen_lines[i]});
        }
    }
    for (const Group& group : groups) {
        std::vector<engine::SniRule> rules;
        for (const Member& m : group.members)
            rules.push_back({rules.size(), m.route->route.name, m.route->route.server_names,
                             m.route->route.alpn});
        const engine::SniRouter router(std::move(rules));
        const Member& last = group.members.back();
        const std::size_t line = group.members.size() == 1 && last.route->tls_line != 0
                                     ? last.route->tls_line
                                     : last.line;
        for (const std::string& problem : router.problems())
            errors.add(line, group.members.size() == 1
                                 ? problem
                                 : fmt::format("listen address {}: {}", quote_input(group.address),
                                               problem));
    }
}

std::vector<ParsedRoute> read_routes(config::TableReader& top, ErrorList& errors) {
    std::vector<ParsedRoute> routes;
    const toml::node* node = top.get("route");
    const toml::array* all = top.array_of_tables("route", "[[route]]");
    if (node == nullptr || (all != nullptr && all->empty())) {
        errors.add(node ? config::line_of(*node) : 1,
                   "no routes: the file needs at least one [[route]]");
        return routes;
    }
    if (all == nullptr)
        return routes; // the wrong type is reported already
    for (std::size_t i = 0; i < all->size(); ++i)
        routes.push_back(config::read_route(*(*all)[i].as_table(), i + 1, errors));
    return routes;
}

} // namespace

ConfigFileResult parse_config(std::string_view text, std::string_view source_name,
                              const TopologyReader& read_topology, NameLookup names) {
    ErrorList errors(source_name);
    toml::table root;
    try {
        root = toml::parse(text, source_name);
    } catch (const toml::parse_error& e) {
        // toml++ stops at the first syntax error: nothing after it can be trusted.
        errors.add(e.source().begin.line, fmt::format("TOML syntax error: {}", e.description()));
        return {std::nullopt, errors.lines(), {}};
    }

    EngineConfig config;
    OperationsConfig operations;
    config::TableReader top(root, errors, "", "", "at the top level");
    if (const toml::table* engine = top.table("engine"))
        config::read_engine_section(*engine, read_topology, errors, config, operations);
    std::vector<ParsedRoute> routes = read_routes(top, errors);
    check_unique_names(routes, errors);
    check_listeners(routes, errors);
    top.report_unknown_keys();
    if (names == NameLookup::Resolve)
        config::check_names(routes, errors);

    if (!errors.empty())
        return {std::nullopt, errors.lines(), {}};
    for (ParsedRoute& r : routes)
        config.routes.push_back(std::move(r.route));
    return {std::move(config), {}, std::move(operations)};
}

ConfigFileResult load_config_file(const std::string& path, const TopologyReader& read_topology,
                                  NameLookup names) {
    const auto fail = [&](std::string_view why) {
        return ConfigFileResult{std::nullopt, {fmt::format("{}: cannot read: {}", path, why)}, {}};
    };
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fail(std::strerror(errno));
    struct stat st {};
    std::string text;
    std::string error;
    if (::fstat(fd, &st) != 0) {
        error = std::strerror(errno);
    } else if (!S_ISREG(st.st_mode)) {
        error = "not a regular file";
    } else if (st.st_size > kLargestFile) {
        error = fmt::format("{} bytes is too large for a configuration file", st.st_size);
    } else {
        text.resize(static_cast<std::size_t>(st.st_size));
        std::size_t done = 0;
        while (done < text.size()) {
            const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                error = n < 0 ? std::strerror(errno) : "the file shrank while being read";
                break;
            }
            done += static_cast<std::size_t>(n);
        }
    }
    ::close(fd);
    if (!error.empty())
        return fail(error);
    return parse_config(text, path, read_topology, names);
}

} // namespace uringfwd
