#include "routing/access_list.hpp"

#include <algorithm>

namespace uringfwd::engine {

namespace {

bool parse_list(const char* name, const std::vector<std::string>& texts, std::vector<Cidr>& out,
                std::string& error) {
    for (const std::string& text : texts) {
        std::string why;
        std::optional<Cidr> range = Cidr::parse(text, why);
        if (!range) {
            error = std::string(name) + ": " + text + ": " + why;
            return false;
        }
        out.push_back(*range);
    }
    return true;
}

bool any_contains(const std::vector<Cidr>& ranges, const sockaddr_storage& peer) {
    return std::any_of(ranges.begin(), ranges.end(),
                       [&](const Cidr& range) { return range.contains(peer); });
}

} // namespace

std::optional<AccessList> AccessList::parse(const std::vector<std::string>& allow,
                                            const std::vector<std::string>& deny,
                                            std::string& error) {
    std::vector<Cidr> allowed;
    std::vector<Cidr> denied;
    if (!parse_list("allow", allow, allowed, error) || !parse_list("deny", deny, denied, error))
        return std::nullopt;
    return AccessList(std::move(allowed), std::move(denied));
}

bool AccessList::admits(const sockaddr_storage& peer) const {
    bool ip = peer.ss_family == AF_INET || peer.ss_family == AF_INET6;
    // Deny first: a client both lists name is denied (nginx's first-match order would
    // make the outcome depend on how the lists are written; here it never does).
    if (ip && any_contains(deny_, peer))
        return false;
    if (allow_.empty())
        return true;
    return ip && any_contains(allow_, peer);
}

} // namespace uringfwd::engine
