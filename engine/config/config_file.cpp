// The file as a whole: TOML syntax, the top-level tables, and the checks that span
// routes (names and listen addresses must be unique). The sections are read by
// engine_section.cpp and route_section.cpp.
#include "uringfwd/config_file.hpp"

#include "config/engine_section.hpp"
#include "config/error_list.hpp"
#include "config/route_section.hpp"
#include "config/table_reader.hpp"
#include "support/quote_input.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

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

// Two listeners on one address would fail at start with EADDRINUSE (or, with
// SO_REUSEPORT, silently share clients between routes); either way it is a mistake.
// Port 0 is exempt: each such listener gets a port of its own.
void check_unique_listeners(const std::vector<ParsedRoute>& routes, ErrorList& errors) {
    struct First {
        const ParsedRoute* route;
        std::size_t line;
    };
    std::map<std::string, First> seen;
    for (const ParsedRoute& r : routes) {
        for (std::size_t i = 0; i < r.route.listen.size(); ++i) {
            const Endpoint& e = r.route.listen[i];
            if (!e.is_unix() && e.port == 0)
                continue;
            const std::string address = e.to_string();
            const auto [it, inserted] = seen.emplace(address, First{&r, r.listen_lines[i]});
            if (inserted)
                continue;
            const First& first = it->second;
            errors.add(r.listen_lines[i],
                       first.route == &r
                           ? fmt::format("{}: listen address {} is listed twice (first at "
                                         "line {})",
                                         r.label, quote_input(address), first.line)
                           : fmt::format("{}: listen address {} is already used by {} (line {})",
                                         r.label, quote_input(address), first.route->label,
                                         first.line));
        }
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
                              const TopologyReader& read_topology) {
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
    check_unique_listeners(routes, errors);
    top.report_unknown_keys();

    if (!errors.empty())
        return {std::nullopt, errors.lines(), {}};
    for (ParsedRoute& r : routes)
        config.routes.push_back(std::move(r.route));
    return {std::move(config), {}, std::move(operations)};
}

ConfigFileResult load_config_file(const std::string& path, const TopologyReader& read_topology) {
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
    return parse_config(text, path, read_topology);
}

} // namespace uringfwd
