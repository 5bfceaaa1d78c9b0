#include "tests/support/other_user.hpp"

#include <grp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace uringfwd::test {

int connect_as_other_user(const std::string& path, std::string_view send, std::string_view expect) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, path.c_str(), std::min(path.size(), sizeof address.sun_path - 1));
    char answer[256];
    const std::size_t want = std::min(expect.size(), sizeof answer);
    const pid_t child = ::fork();
    if (child == 0) {
        // Only async-signal-safe calls from here: the parent has threads.
        ::alarm(5); // bounded even if the peer never answers
        if (::setgroups(0, nullptr) != 0 || ::setresgid(kOtherGid, kOtherGid, kOtherGid) != 0 ||
            ::setresuid(kOtherUid, kOtherUid, kOtherUid) != 0)
            ::_exit(200);
        const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0)
            ::_exit(errno);
        if (::write(fd, send.data(), send.size()) != static_cast<ssize_t>(send.size()))
            ::_exit(201);
        std::size_t got = 0;
        while (got < want) {
            const ssize_t n = ::read(fd, answer + got, want - got);
            if (n <= 0)
                ::_exit(201);
            got += static_cast<std::size_t>(n);
        }
        ::_exit(std::memcmp(answer, expect.data(), want) == 0 ? 0 : 201);
    }
    int status = 0;
    if (child < 0 || ::waitpid(child, &status, 0) != child)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 256 + WTERMSIG(status);
}

} // namespace uringfwd::test
