#include "ops/access_log_line.hpp"

#include <fmt/format.h>

#include <cstring>
#include <ctime>
#include <iterator>

namespace uringfwd::ops {
namespace {

// RFC 3339 UTC with microseconds: sorts as text and every log tool parses it.
void append_time(std::string& out, std::chrono::system_clock::time_point when) {
    using namespace std::chrono;
    const auto us = duration_cast<microseconds>(when.time_since_epoch()).count();
    const std::time_t seconds = static_cast<std::time_t>(us / 1'000'000);
    std::tm tm{};
    gmtime_r(&seconds, &tm);
    fmt::format_to(std::back_inserter(out), "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
                   tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                   us % 1'000'000);
}

std::string address_of(const Endpoint& e) {
    if (e.is_unix())
        return e.host.empty() ? std::string() : e.to_string();
    if (e.host.empty() && e.port == 0)
        return {};
    return e.to_string();
}

// The errno's symbolic name (strerrorname_np, glibc 2.32+), or its number.
std::string error_name(int error) {
    const char* name = strerrorname_np(error);
    return name != nullptr ? std::string(name) : fmt::format("{}", error);
}

// Text fields are bare words; one that would break the line into more fields is quoted.
bool needs_quotes(std::string_view text) {
    for (char c : text)
        if (static_cast<unsigned char>(c) <= ' ' || c == '"' || c == '\\' || c == '\x7f')
            return true;
    return false;
}

void append_text_field(std::string& out, std::string_view key, std::string_view value) {
    fmt::format_to(std::back_inserter(out), " {}=", key);
    if (value.empty())
        out += '-';
    else if (needs_quotes(value))
        append_json_string(out, value);
    else
        out += value;
}

void append_json_field(std::string& out, std::string_view key, std::string_view value) {
    fmt::format_to(std::back_inserter(out), ",\"{}\":", key);
    if (value.empty())
        out += "null";
    else
        append_json_string(out, value);
}

} // namespace

void append_json_string(std::string& out, std::string_view text) {
    out += '"';
    for (char c : text) {
        const auto u = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (u < 0x20 || u == 0x7f) {
            fmt::format_to(std::back_inserter(out), "\\u{:04x}", u);
        } else {
            out += c;
        }
    }
    out += '"';
}

void append_access_line(std::string& out, AccessLogFormat format, const ConnectionRecord& record,
                        std::chrono::system_clock::time_point when) {
    const std::string client = address_of(record.info.client);
    const std::string upstream = address_of(record.upstream);
    const std::string error = record.error != 0 ? error_name(record.error) : std::string();
    const std::string_view reason = to_string(record.reason);
    if (format == AccessLogFormat::Json) {
        out += "{\"time\":\"";
        append_time(out, when);
        out += '"';
        append_json_field(out, "route", record.info.route);
        append_json_field(out, "client", client);
        append_json_field(out, "upstream", upstream);
        fmt::format_to(std::back_inserter(out),
                       ",\"bytes_to_upstream\":{},\"bytes_to_client\":{},\"connect_us\":{},"
                       "\"duration_us\":{},\"reason\":\"{}\"",
                       record.bytes_to_upstream, record.bytes_to_client,
                       record.connect_time.count(), record.duration.count(), reason);
        append_json_field(out, "error", error);
        out += "}\n";
        return;
    }
    append_time(out, when);
    append_text_field(out, "route", record.info.route);
    append_text_field(out, "client", client);
    append_text_field(out, "upstream", upstream);
    fmt::format_to(
        std::back_inserter(out),
        " bytes_to_upstream={} bytes_to_client={} connect_us={} duration_us={} reason={}",
        record.bytes_to_upstream, record.bytes_to_client, record.connect_time.count(),
        record.duration.count(), reason);
    if (!error.empty())
        fmt::format_to(std::back_inserter(out), " error={}", error);
    out += '\n';
}

} // namespace uringfwd::ops
