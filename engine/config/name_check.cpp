#include "config/name_check.hpp"

#include "net/socket_address.hpp"
#include "platform/accounts.hpp"
#include "support/quote_input.hpp"

#include <fmt/format.h>

#include <exception>

namespace uringfwd::config {

void check_names(const std::vector<ParsedRoute>& routes, ErrorList& errors) {
    for (const ParsedRoute& r : routes) {
        const RouteConfig& route = r.route;
        for (std::size_t i = 0; i < route.listen.size() && i < r.listen_lines.size(); ++i) {
            const std::string shown = quote_input(route.listen[i].to_string());
            try {
                engine::resolve(route.listen[i]);
            } catch (const std::exception& e) {
                errors.add(r.listen_lines[i],
                           fmt::format("{}: listen {}: {}", r.label, shown, e.what()));
            }
            if (i >= route.listen_access.size())
                continue;
            const UnixSocketAccess& access = route.listen_access[i];
            try {
                if (!access.user.empty())
                    engine::lookup_user(access.user);
                if (!access.group.empty())
                    engine::lookup_group(access.group);
            } catch (const std::exception& e) {
                errors.add(r.listen_lines[i],
                           fmt::format("{}: listen {}: {}", r.label, shown, e.what()));
            }
        }
        const std::vector<UpstreamMember>& members = route.pool.members;
        for (std::size_t m = 0; m < members.size() && m < r.member_lines.size(); ++m) {
            try {
                engine::resolve_upstream(members[m].address);
            } catch (const std::exception& e) {
                errors.add(r.member_lines[m],
                           fmt::format("{}: upstream address {}: {}", r.label,
                                       quote_input(members[m].address.to_string()), e.what()));
            }
        }
    }
}

} // namespace uringfwd::config
