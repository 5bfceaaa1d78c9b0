#include "config/access_keys.hpp"

#include "net/cidr.hpp"
#include "support/quote_input.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cstdint>

namespace uringfwd::config {
namespace {

constexpr std::string_view kRate = "a rate such as \"10/s\" (new connections per second), or 0";

} // namespace

void read_cidr_list(TableReader& reader, std::string_view key, std::vector<std::string>& out,
                    std::string_view array_what, std::string_view item_what) {
    const toml::node* node = reader.get(key);
    if (node == nullptr)
        return;
    if (!node->is_array()) {
        reader.wrong(key, *node, array_what);
        return;
    }
    for (const toml::node& one : *node->as_array()) {
        if (!one.is_string()) {
            reader.wrong(key, one, item_what);
            continue;
        }
        const std::string& text = one.as_string()->get();
        std::string error;
        if (engine::Cidr::parse(text, error))
            out.push_back(text);
        else
            reader.error(line_of(one), fmt::format("{}: {}: {}", key, quote_input(text), error));
    }
}

std::optional<unsigned> parse_connection_rate(std::string_view text) {
    constexpr std::string_view kPerSecond = "/s";
    if (text.size() <= kPerSecond.size() || !text.ends_with(kPerSecond))
        return std::nullopt;
    const std::string_view number = text.substr(0, text.size() - kPerSecond.size());
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
    if (ec != std::errc{} || end != number.data() + number.size() || value == 0)
        return std::nullopt;
    return value;
}

void read_access_lists(TableReader& reader, std::vector<std::string>& allow,
                       std::vector<std::string>& deny) {
    constexpr std::string_view kArray = "an array of CIDR ranges such as [\"10.0.0.0/8\"]";
    constexpr std::string_view kItem = "a CIDR range such as \"10.0.0.0/8\"";
    read_cidr_list(reader, "allow", allow, kArray, kItem);
    read_cidr_list(reader, "deny", deny, kArray, kItem);
}

void read_source_limits(TableReader& reader, RouteConfig& route) {
    if (const auto v = reader.integer("max_connections_per_source", 0, UINT32_MAX))
        route.max_connections_per_source = static_cast<std::size_t>(*v);
    if (const toml::node* node = reader.get("connection_rate_per_source")) {
        if (node->is_integer() && node->as_integer()->get() == 0)
            route.connection_rate_per_source = 0;
        else if (const auto rate = node->is_string()
                                       ? parse_connection_rate(node->as_string()->get())
                                       : std::nullopt)
            route.connection_rate_per_source = *rate;
        else
            reader.wrong("connection_rate_per_source", *node, kRate);
    }
    if (const auto v = reader.integer("connection_burst_per_source", 0, UINT32_MAX)) {
        route.connection_burst_per_source = static_cast<unsigned>(*v);
        if (*v != 0 && route.connection_rate_per_source == 0)
            reader.error(line_of(*reader.get("connection_burst_per_source")),
                         "connection_burst_per_source needs connection_rate_per_source (the "
                         "rate the bucket refills at)");
    }
    if (const auto v = reader.integer("source_prefix_v4", 1, 32))
        route.source_prefix_v4 = static_cast<unsigned>(*v);
    if (const auto v = reader.integer("source_prefix_v6", 1, 128))
        route.source_prefix_v6 = static_cast<unsigned>(*v);
}

void read_engine_access(TableReader& reader, EngineConfig::Access& access) {
    read_access_lists(reader, access.allow, access.deny);
    if (const auto v = reader.integer(
            "source_table_size", static_cast<int64_t>(EngineConfig::Access::kMinSourceTableSize),
            static_cast<int64_t>(EngineConfig::Access::kMaxSourceTableSize)))
        access.source_table_size = static_cast<std::size_t>(*v);
}

} // namespace uringfwd::config
