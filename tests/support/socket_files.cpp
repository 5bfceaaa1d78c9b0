#include "tests/support/socket_files.hpp"

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

namespace uringfwd::test {

using namespace std::chrono_literals;

FileId identify(const std::string& path) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0)
        return {};
    return {true,      S_ISSOCK(st.st_mode), S_ISDIR(st.st_mode), st.st_dev,
            st.st_ino, st.st_mode & 07777};
}

std::string contents(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

bool leave_stale_socket(const std::string& path, int type) {
    UniqueFd fd{::socket(AF_UNIX, type | SOCK_CLOEXEC, 0)};
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    if (!fd || path.size() >= sizeof(address.sun_path)) {
        ADD_FAILURE() << "no socket for " << path << ": " << std::strerror(errno);
        return false;
    }
    std::memcpy(address.sun_path, path.c_str(), path.size());
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
        ADD_FAILURE() << "bind " << path << ": " << std::strerror(errno);
        return false;
    }
    return true; // closed here, the file left
}

std::string failed_start(std::vector<std::string> args) {
    BinaryProcess proc{uring_fwd_binary(), std::move(args)};
    const std::optional<ExitStatus> status = proc.wait_exit(Deadline{10s});
    if (!status) {
        ADD_FAILURE() << "started, though it should not have:\n" << proc.stderr_text();
        return proc.stderr_text();
    }
    EXPECT_TRUE(status->exited && status->code == 1) << status->describe();
    std::this_thread::sleep_for(50ms); // the last of stderr
    return proc.stderr_text();
}

void stop(BinaryProcess& proc) {
    proc.signal(SIGTERM);
    const std::optional<ExitStatus> status = proc.wait_exit(Deadline{10s});
    ASSERT_TRUE(status) << proc.stderr_text();
    EXPECT_TRUE(status->exited && status->code == 0) << status->describe();
}

} // namespace uringfwd::test
