// Users and groups named in the configuration (a Unix listener's owner), looked up as
// a start does it: through NSS (/etc/passwd, nss-systemd's dynamic users, ...), which
// may block, so never on a shard. A number is taken as the id itself, as chown(1) does.
// Public: the uring-fwd binary looks up its control socket's group the same way.
#pragma once

#include <sys/types.h>

#include <string>

namespace uringfwd {

// Throw std::runtime_error ("no user named \"x\"", "no group named \"x\"").
uid_t lookup_user(const std::string& name);
gid_t lookup_group(const std::string& name);

} // namespace uringfwd
