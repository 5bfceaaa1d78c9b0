// Acting as another user in a test (root only): who may connect to a Unix socket file
// is decided by its mode and owner, and only a process of another uid can show it.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

namespace uringfwd::test {

// nobody:nogroup on Debian.
inline constexpr uid_t kOtherUid = 65534;
inline constexpr gid_t kOtherGid = 65534;

// Connects to the Unix stream socket `path` as uid/gid 65534 (a forked child drops
// root's ids first), sends `send` and reads back as many bytes as `expect` has, which
// must be them: 0 when that worked, else the errno that stopped it (EACCES: the file's
// mode refused us), 201 for a wrong or short answer, 200 when the ids could not be
// dropped, -1 when the child could not be run. Bounded: the child gives up after 5 s.
int connect_as_other_user(const std::string& path, std::string_view send = "x",
                          std::string_view expect = "x");

} // namespace uringfwd::test
