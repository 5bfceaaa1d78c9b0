#include "uringfwd/route.hpp"

#include "net/cidr.hpp"
#include "net/socket_controls.hpp"

#include <utility>

namespace uringfwd {

std::string_view to_string(BalancePolicy policy) {
    switch (policy) {
    case BalancePolicy::RoundRobin:
        return "round-robin";
    case BalancePolicy::LeastActive:
        return "least-active";
    case BalancePolicy::Maglev:
        return "maglev";
    }
    return "?";
}

std::optional<BalancePolicy> parse_balance_policy(std::string_view text) {
    for (BalancePolicy p :
         {BalancePolicy::RoundRobin, BalancePolicy::LeastActive, BalancePolicy::Maglev})
        if (text == to_string(p))
            return p;
    return std::nullopt;
}

std::string_view to_string(ProxyVersion version) {
    switch (version) {
    case ProxyVersion::Off:
        return "off";
    case ProxyVersion::V1:
        return "v1";
    case ProxyVersion::V2:
        return "v2";
    }
    return "?";
}

std::optional<ProxyVersion> parse_proxy_version(std::string_view text) {
    for (ProxyVersion v : {ProxyVersion::Off, ProxyVersion::V1, ProxyVersion::V2})
        if (text == to_string(v))
            return v;
    return std::nullopt;
}

std::optional<uint8_t> parse_proxy_tlv_type(std::string_view text) {
    // doc/proxy-protocol.txt section 2.2 registers these types.
    static constexpr std::pair<std::string_view, uint8_t> kNames[] = {
        {"alpn", 0x01}, {"authority", 0x02}, {"unique_id", 0x05}, {"ssl", 0x20}, {"netns", 0x30}};
    for (const auto& [name, type] : kNames)
        if (text == name)
            return type;
    unsigned value = 0;
    int base = 10;
    std::string_view digits = text;
    if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
        base = 16;
        digits.remove_prefix(2);
    }
    if (digits.empty() || digits.size() > 3)
        return std::nullopt;
    for (char c : digits) {
        int d = c >= '0' && c <= '9'                 ? c - '0'
                : base == 16 && c >= 'a' && c <= 'f' ? c - 'a' + 10
                : base == 16 && c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                     : -1;
        if (d < 0)
            return std::nullopt;
        value = value * static_cast<unsigned>(base) + static_cast<unsigned>(d);
    }
    if (value > 255)
        return std::nullopt;
    return static_cast<uint8_t>(value);
}

std::string cidr_problem(std::string_view text) {
    std::string error;
    if (engine::Cidr::parse(text, error))
        return {};
    return error.empty() ? std::string("not a CIDR range") : error;
}

std::string source_address_problem(std::string_view text) {
    std::string error;
    if (engine::parse_source_address(text, error))
        return {};
    return error;
}

} // namespace uringfwd
