// The one rule for the binary-upgrade control socket's path, for [engine] upgrade_socket
// and --upgrade-socket alike: absolute (the successor may start in another working
// directory, and both must name the same file) and short enough for sockaddr_un's
// sun_path (108 bytes with its NUL).
#pragma once

#include <string_view>

namespace uringfwd::config {

// What a path must be, for messages: "<key> must be <this>, not ...".
inline constexpr std::string_view kUpgradeSocketPath = "an absolute path of at most 107 bytes";

inline bool is_upgrade_socket_path(std::string_view path) {
    return !path.empty() && path.front() == '/' && path.size() <= 107;
}

} // namespace uringfwd::config
