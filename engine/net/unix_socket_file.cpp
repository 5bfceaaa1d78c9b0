#include "net/unix_socket_file.hpp"

#include "uring/unique_fd.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

namespace uringfwd {
namespace {

const char* kind_of(mode_t mode) {
    if (S_ISREG(mode))
        return "a regular file";
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISLNK(mode))
        return "a symbolic link";
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    return "not a socket";
}

// The address of a Unix path and its length, or nullopt when sun_path cannot hold it.
struct UnixPathAddress {
    sockaddr_un address{};
    socklen_t length = 0;
    const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&address); }
};
std::optional<UnixPathAddress> unix_path_address(const std::string& path) {
    UnixPathAddress out;
    if (path.size() >= sizeof(out.address.sun_path))
        return std::nullopt;
    out.address.sun_family = AF_UNIX;
    std::memcpy(out.address.sun_path, path.data(), path.size());
    out.length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + 1);
    return out;
}

// connect(2)'s errno for `path`, 0 when someone accepted. Non-blocking, so a live
// socket whose backlog is full answers EAGAIN at once instead of making us wait.
int probe_connect(const std::string& path) {
    uring::UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!probe)
        return errno;
    const std::optional<UnixPathAddress> address = unix_path_address(path);
    if (!address)
        return ENAMETOOLONG;
    if (::connect(probe.get(), address->get(), address->length) == 0)
        return 0;
    return errno;
}

} // namespace

void clear_stale_socket(const std::string& path, std::string_view shown) {
    auto fail = [&](const std::string& why) {
        throw std::runtime_error(fmt::format("cannot listen on {}: {}", shown, why));
    };
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) {
        if (errno == ENOENT)
            return; // gone meanwhile: the bind may try again
        fail(fmt::format("the path is taken and cannot be examined: {}", std::strerror(errno)));
    }
    if (!S_ISSOCK(st.st_mode))
        fail(fmt::format("the path exists and is {}, not a socket; not replacing it",
                         kind_of(st.st_mode)));
    const int err = probe_connect(path);
    if (err == 0 || err == EAGAIN)
        fail("it is in use by another process (a connect to it was accepted); not replacing it");
    if (err != ECONNREFUSED)
        fail(fmt::format("the socket file exists and a connect to it says \"{}\", so it may be "
                         "in use; not replacing it",
                         std::strerror(err)));
    // A socket file nobody accepts on: left by a process that ended.
    if (::unlink(path.c_str()) != 0 && errno != ENOENT)
        fail(fmt::format("cannot remove the stale socket file: {}", std::strerror(errno)));
}

int bind_unix_path(int fd, const std::string& path, std::string_view shown) {
    const std::optional<UnixPathAddress> address = unix_path_address(path);
    if (!address) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (::bind(fd, address->get(), address->length) == 0)
        return 0;
    if (errno != EADDRINUSE)
        return -1;
    clear_stale_socket(path, shown);
    return ::bind(fd, address->get(), address->length);
}

OwnedSocketFile::OwnedSocketFile(std::string path) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode))
        throw std::runtime_error(fmt::format("unix:{} is not the socket just bound there", path));
    path_ = std::move(path);
    device_ = st.st_dev;
    inode_ = st.st_ino;
}

OwnedSocketFile::OwnedSocketFile(OwnedSocketFile&& other) noexcept
    : path_(std::exchange(other.path_, {})), device_(other.device_), inode_(other.inode_) {}

OwnedSocketFile& OwnedSocketFile::operator=(OwnedSocketFile&& other) noexcept {
    if (this != &other) {
        remove();
        path_ = std::exchange(other.path_, {});
        device_ = other.device_;
        inode_ = other.inode_;
    }
    return *this;
}

bool OwnedSocketFile::unchanged() const {
    struct stat st {};
    return owned() && ::lstat(path_.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) &&
           st.st_dev == device_ && st.st_ino == inode_;
}

void OwnedSocketFile::remove() {
    if (unchanged())
        ::unlink(path_.c_str());
    path_.clear();
}

} // namespace uringfwd
