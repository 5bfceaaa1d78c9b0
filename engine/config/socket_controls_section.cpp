#include "config/socket_controls_section.hpp"

#include "net/socket_controls.hpp"
#include "support/quote_input.hpp"
#include "uringfwd/config_file.hpp"

#include <fmt/format.h>

namespace uringfwd::config {
namespace {

using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::seconds;

// idle and interval: whole seconds within the kernel's range (TCP_KEEPIDLE and
// TCP_KEEPINTVL take seconds; "1500ms" would be cut, so it is refused).
std::optional<seconds> keepalive_seconds(TableReader& reader, std::string_view key, seconds max) {
    const auto v = reader.duration(key, microseconds{seconds{1}}, microseconds{max});
    if (!v)
        return std::nullopt;
    if (*v % seconds{1} != microseconds{0}) {
        reader.error(line_of(*reader.get(key)),
                     fmt::format("{} must be whole seconds (the kernel counts it in seconds), "
                                 "not {}",
                                 key, format_duration(*v)));
        return std::nullopt;
    }
    return duration_cast<seconds>(*v);
}

// client_keepalive = { idle = "60s", interval = "10s", count = 6 }: each key optional
// (the kernel's default where one is left out); the table turns keepalive on.
void read_keepalive(TableReader& route, const std::string& context, ErrorList& errors,
                    std::string_view key, std::optional<TcpKeepalive>& out) {
    const toml::table* table = route.table(key);
    if (table == nullptr)
        return;
    TableReader reader(*table, errors, context, fmt::format("{} ", key),
                       fmt::format("in {} (idle, interval, count)", key));
    TcpKeepalive keepalive;
    keepalive.idle = keepalive_seconds(reader, "idle", engine::kMaxKeepaliveIdle);
    keepalive.interval = keepalive_seconds(reader, "interval", engine::kMaxKeepaliveInterval);
    if (const auto v = reader.integer("count", 1, engine::kMaxKeepaliveCount))
        keepalive.count = static_cast<unsigned>(*v);
    reader.report_unknown_keys();
    out = keepalive;
}

void read_user_timeout(TableReader& reader, std::string_view key, milliseconds& out) {
    if (const auto v = reader.duration(key, microseconds{0}, microseconds{engine::kMaxUserTimeout}))
        out = duration_cast<milliseconds>(*v);
}

} // namespace

void read_socket_controls(TableReader& reader, const std::string& context, ErrorList& errors,
                          RouteConfig& route) {
    read_keepalive(reader, context, errors, "client_keepalive", route.client_keepalive);
    read_keepalive(reader, context, errors, "upstream_keepalive", route.upstream_keepalive);
    read_user_timeout(reader, "client_user_timeout", route.client_user_timeout);
    read_user_timeout(reader, "upstream_user_timeout", route.upstream_user_timeout);
    if (const auto v = reader.integer("mark", 0, 0xffffffff))
        route.mark = static_cast<uint32_t>(*v);
    if (const auto v = reader.integer("tos", 0, 255))
        route.tos = static_cast<unsigned>(*v);
    read_source(reader, route.source);
}

void read_source(TableReader& reader, std::vector<std::string>& out) {
    const toml::node* node = reader.get("source");
    if (node == nullptr)
        return;
    constexpr std::string_view kExpected =
        "an IP address or a non-empty array of them, such as \"192.0.2.10\"";
    const auto take = [&](const toml::node& one) {
        if (!one.is_string()) {
            reader.wrong("source", one, kExpected);
            return;
        }
        const std::string& text = one.as_string()->get();
        if (const std::string why = source_address_problem(text); !why.empty())
            reader.error(line_of(one), fmt::format("source {}: {}", quote_input(text), why));
        else
            out.push_back(text);
    };
    if (const toml::array* all = node->as_array()) {
        if (all->empty())
            reader.wrong("source", *node, kExpected);
        for (const toml::node& one : *all)
            take(one);
        return;
    }
    take(*node);
}

} // namespace uringfwd::config
