#include "cli/socket_activation.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <string_view>

namespace uringfwd::cli {
namespace {

// sd_listen_fds(3): the first passed fd is SD_LISTEN_FDS_START, 3.
constexpr int kFirstPassedFd = 3;

bool parse_number(const char* text, long& out) {
    if (text == nullptr || *text == '\0')
        return false;
    char* end = nullptr;
    out = std::strtol(text, &end, 10);
    return *end == '\0' && out >= 0;
}

} // namespace

ActivatedSockets take_activated_sockets() {
    ActivatedSockets out;
    long pid = 0;
    long count = 0;
    const bool ours = parse_number(std::getenv("LISTEN_PID"), pid) && pid == ::getpid() &&
                      parse_number(std::getenv("LISTEN_FDS"), count) && count > 0 &&
                      count < 4096;
    if (ours) {
        for (int fd = kFirstPassedFd; fd < kFirstPassedFd + count; ++fd) {
            ::fcntl(fd, F_SETFD, FD_CLOEXEC);
            out.fds.push_back(fd);
        }
        if (const char* names = std::getenv("LISTEN_FDNAMES")) {
            std::string_view rest = names;
            while (!rest.empty()) {
                const std::size_t colon = rest.find(':');
                out.names.emplace_back(rest.substr(0, colon));
                rest = colon == std::string_view::npos ? "" : rest.substr(colon + 1);
            }
        }
    }
    ::unsetenv("LISTEN_PID");
    ::unsetenv("LISTEN_FDS");
    ::unsetenv("LISTEN_FDNAMES");
    return out;
}

} // namespace uringfwd::cli
