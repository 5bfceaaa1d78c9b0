#include "tests/hardening/command.hpp"

#include "tests/support/deadline.hpp"
#include "tests/support/unique_fd.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace uringfwd::test {

std::string join_command(const std::vector<std::string>& argv) {
    std::string out;
    for (const auto& a : argv) {
        if (!out.empty()) {
            out += ' ';
        }
        out += a;
    }
    return out;
}

CommandResult run_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
    CommandResult result;
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
        result.output = std::strerror(errno);
        return result;
    }
    UniqueFd read_end{fds[0]};
    UniqueFd write_end{fds[1]};

    std::vector<std::string> storage = argv;
    std::vector<char*> args;
    for (auto& a : storage) {
        args.push_back(a.data());
    }
    args.push_back(nullptr);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, write_end.get(), STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, write_end.get(), STDERR_FILENO);
    // Test sockets must not leak into helpers that may outlive a failing test.
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    pid_t pid = -1;
    const int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    write_end.reset();
    if (rc != 0) {
        result.output = std::string("cannot run ") + argv[0] + ": " + std::strerror(rc);
        return result;
    }

    const Deadline deadline{timeout};
    char buf[4096];
    for (;;) {
        pollfd p{read_end.get(), POLLIN, 0};
        const int n = ::poll(&p, 1, deadline.poll_timeout_ms());
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break; // timed out: the kill below ends it
        }
        const ssize_t got = ::read(read_end.get(), buf, sizeof(buf));
        if (got < 0 && errno == EINTR) {
            continue;
        }
        if (got <= 0) {
            break;
        }
        result.output.append(buf, static_cast<std::size_t>(got));
    }
    int wstatus = 0;
    // Output closed early (or the deadline passed): give it what is left, then kill.
    while (::waitpid(pid, &wstatus, WNOHANG) == 0) {
        if (deadline.expired()) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &wstatus, 0);
            result.output += "\n(killed: still running after the time limit)";
            return result;
        }
        ::usleep(5000);
    }
    if (WIFEXITED(wstatus)) {
        result.status = WEXITSTATUS(wstatus);
    }
    return result;
}

} // namespace uringfwd::test
