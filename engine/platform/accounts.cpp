#include "platform/accounts.hpp"

#include "support/quote_input.hpp"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <limits>
#include <optional>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

namespace uringfwd {
namespace {

// "1000" as an id; nullopt for anything else (a name).
std::optional<unsigned> as_number(const std::string& text) {
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() ||
        value == std::numeric_limits<unsigned>::max()) // (uid_t)-1 means "unchanged"
        return std::nullopt;
    return value;
}

// getpwnam_r/getgrnam_r with a buffer that grows on ERANGE. The entry's strings point
// into that buffer, gone on return: callers read only its ids.
template <typename Entry, typename Lookup>
std::optional<Entry> find(const std::string& name, const char* kind, Lookup lookup) {
    std::vector<char> buffer(1024);
    for (;;) {
        Entry entry{};
        Entry* found = nullptr;
        const int rc = lookup(name.c_str(), &entry, buffer.data(), buffer.size(), &found);
        if (rc == ERANGE && buffer.size() < (std::size_t{1} << 20)) {
            buffer.resize(buffer.size() * 2);
            continue;
        }
        if (rc != 0)
            throw std::runtime_error(fmt::format("cannot look up the {} {}: {}", kind,
                                                 quote_input(name), std::strerror(rc)));
        if (found == nullptr)
            return std::nullopt;
        return entry;
    }
}

} // namespace

uid_t lookup_user(const std::string& name) {
    if (auto id = as_number(name))
        return static_cast<uid_t>(*id);
    if (auto entry = find<passwd>(name, "user", ::getpwnam_r))
        return entry->pw_uid;
    throw std::runtime_error(fmt::format("no user named {}", quote_input(name)));
}

gid_t lookup_group(const std::string& name) {
    if (auto id = as_number(name))
        return static_cast<gid_t>(*id);
    if (auto entry = find<group>(name, "group", ::getgrnam_r))
        return entry->gr_gid;
    throw std::runtime_error(fmt::format("no group named {}", quote_input(name)));
}

} // namespace uringfwd
