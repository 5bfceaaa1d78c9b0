#include "tests/support/binary_process.hpp"

#include "tests/support/data_path_under_test.hpp"
#include "tests/support/eventually.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fmt/core.h>
#include <memory>
#include <stdexcept>
#include <system_error>

extern char** environ;

namespace uringfwd::test {

std::string ExitStatus::describe() const {
    return exited ? fmt::format("exit code {}", code) : fmt::format("killed by signal {}", signal);
}

const std::string& uring_fwd_binary() {
#ifdef URING_FWD_BINARY
    static const std::string path = URING_FWD_BINARY;
#else
    static const std::string path = "uring-fwd";
#endif
    return path;
}

namespace {

// Pipe whose read end stays in the parent (close-on-exec) and write end becomes the
// child's stdout or stderr.
std::pair<UniqueFd, UniqueFd> make_pipe() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
        throw std::system_error(errno, std::generic_category(), "pipe2");
    }
    return {UniqueFd{fds[0]}, UniqueFd{fds[1]}};
}

} // namespace

BinaryProcess::BinaryProcess(const std::string& path, std::vector<std::string> args,
                             const SpawnOptions& options)
    : cancel_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    auto [out_r, out_w] = make_pipe();
    auto [err_r, err_w] = make_pipe();

    std::vector<std::string> argv_storage;
    std::string program = path;
    if (!options.listen_fds.empty()) {
        program = "/bin/sh";
        argv_storage = {"/bin/sh", "-c", "LISTEN_PID=$$ exec \"$0\" \"$@\""};
    }
    argv_storage.push_back(path);
    for (auto& a : with_data_path_under_test(path, std::move(args))) {
        argv_storage.push_back(std::move(a));
    }
    std::vector<char*> argv;
    for (auto& a : argv_storage) {
        argv.push_back(a.data());
    }
    argv.push_back(nullptr);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out_w.get(), STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, err_w.get(), STDERR_FILENO);
    // The test process holds many sockets (peers, clients, an in-process engine):
    // none of them may leak into the child and skew its fd counts.
    // The passed fds go to 3, 4, ...: first moved above that range (close-on-exec), so
    // one dup2 cannot overwrite the source of the next.
    std::vector<UniqueFd> moved;
    for (std::size_t i = 0; i < options.listen_fds.size(); ++i) {
        moved.emplace_back(::fcntl(options.listen_fds[i], F_DUPFD_CLOEXEC, 256));
        posix_spawn_file_actions_adddup2(&actions, moved.back().get(), 3 + static_cast<int>(i));
    }
    posix_spawn_file_actions_addclosefrom_np(&actions,
                                             3 + static_cast<int>(options.listen_fds.size()));
    std::vector<std::string> env_storage;
    for (char** e = environ; *e != nullptr; ++e) {
        const std::string entry = *e;
        const std::string key = entry.substr(0, entry.find('='));
        const bool replaced =
            std::any_of(options.env.begin(), options.env.end(),
                        [&](const auto& o) { return o.substr(0, o.find('=')) == key; });
        if (!replaced && key != "LISTEN_FDS" && key != "LISTEN_PID" && key != "NOTIFY_SOCKET")
            env_storage.push_back(entry);
    }
    for (const std::string& entry : options.env)
        env_storage.push_back(entry);
    if (!options.listen_fds.empty())
        env_storage.push_back(fmt::format("LISTEN_FDS={}", options.listen_fds.size()));
    std::vector<char*> envp;
    for (auto& entry : env_storage)
        envp.push_back(entry.data());
    envp.push_back(nullptr);
    // The child starts with default signal dispositions and an empty mask, whatever
    // the test runner set up.
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    const int rc = ::posix_spawn(&pid_, program.c_str(), &actions, &attr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
        throw std::system_error(rc, std::generic_category(), "posix_spawn " + path);
    }
    out_read_ = std::move(out_r);
    err_read_ = std::move(err_r);
    drainer_ = std::thread([this] { drain_loop(); });
}

BinaryProcess::~BinaryProcess() {
    if (!status_) {
        // The first SIGTERM lets open connections drain; a second resets them. Only a
        // binary that ignores both is killed.
        signal(SIGTERM);
        if (!wait_exit(Deadline{milliseconds{1000}})) {
            signal(SIGTERM);
            if (!wait_exit(Deadline{milliseconds{4000}})) {
                ::kill(pid_, SIGKILL);
                try_reap(true);
            }
        }
    }
    const uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(cancel_.get(), &one, sizeof(one));
    drainer_.join();
}

void BinaryProcess::drain_loop() {
    char buf[4096];
    bool out_open = true;
    bool err_open = true;
    while (out_open || err_open) {
        pollfd pfds[3] = {{out_open ? out_read_.get() : -1, POLLIN, 0},
                          {err_open ? err_read_.get() : -1, POLLIN, 0},
                          {cancel_.get(), POLLIN, 0}};
        if (::poll(pfds, 3, 1000) < 0 && errno != EINTR) {
            break;
        }
        for (int i = 0; i < 2; ++i) {
            if (pfds[i].fd < 0 || pfds[i].revents == 0) {
                continue;
            }
            const ssize_t n = ::read(pfds[i].fd, buf, sizeof(buf));
            if (n <= 0 && !(n < 0 && errno == EINTR)) {
                (i == 0 ? out_open : err_open) = false;
                continue;
            }
            if (n > 0) {
                std::lock_guard lock(mu_);
                (i == 0 ? out_ : err_).append(buf, static_cast<std::size_t>(n));
                cv_.notify_all();
            }
        }
        if (pfds[2].revents & POLLIN) {
            break;
        }
    }
    std::lock_guard lock(mu_);
    streams_closed_ = true;
    cv_.notify_all();
}

std::optional<Endpoint> BinaryProcess::wait_listening(const Deadline& deadline) {
    static constexpr std::string_view kMarker = "listening on ";
    std::unique_lock lock(mu_);
    for (;;) {
        if (const auto pos = err_.find(kMarker); pos != std::string::npos) {
            const auto begin = pos + kMarker.size();
            const auto end = err_.find_first_of(" \t\r\n", begin);
            if (end != std::string::npos) {
                std::string text = err_.substr(begin, end - begin);
                // The endpoint may be followed by punctuation: "on 127.0.0.1:9000, ...".
                while (!text.empty() && (text.back() == ',' || text.back() == ';' ||
                                         text.back() == ')' || text.back() == '.')) {
                    text.pop_back();
                }
                try {
                    return Endpoint::parse(text);
                } catch (const std::exception&) {
                    return std::nullopt;
                }
            }
        }
        if (streams_closed_ || deadline.expired()) {
            return std::nullopt;
        }
        // Wake periodically as well: the child may exit without closing stderr.
        cv_.wait_until(lock, std::min(deadline.when(), Clock::now() + milliseconds{50}));
        lock.unlock();
        const bool gone = try_reap(false);
        lock.lock();
        if (gone && streams_closed_ && err_.find(kMarker) == std::string::npos) {
            return std::nullopt;
        }
    }
}

bool BinaryProcess::try_reap(bool block) {
    if (status_) {
        return true;
    }
    int wstatus = 0;
    pid_t r;
    do {
        r = ::waitpid(pid_, &wstatus, block ? 0 : WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r != pid_) {
        return false;
    }
    ExitStatus s;
    s.exited = WIFEXITED(wstatus);
    s.code = s.exited ? WEXITSTATUS(wstatus) : 0;
    s.signal = WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0;
    status_ = s;
    return true;
}

std::optional<ExitStatus> BinaryProcess::wait_exit(const Deadline& deadline) {
    for (;;) {
        if (try_reap(false)) {
            // The child is gone, so its ends of the pipes are closed: give the drain
            // thread the moment it needs to read the last of its output, or a caller
            // looking at stderr right away may find it empty (seen on a loaded machine).
            std::unique_lock lock(mu_);
            cv_.wait_for(lock, milliseconds{1000}, [this] { return streams_closed_; });
            return status_;
        }
        if (deadline.expired()) {
            return std::nullopt;
        }
        std::this_thread::sleep_for(milliseconds{5});
    }
}

void BinaryProcess::signal(int sig) {
    if (!status_) {
        ::kill(pid_, sig);
    }
}

std::string BinaryProcess::stderr_text() const {
    std::lock_guard lock(mu_);
    return err_;
}

bool BinaryProcess::logs(const std::string& text, const Deadline& deadline) const {
    return eventually([&] { return stderr_text().find(text) != std::string::npos; }, deadline);
}

std::string BinaryProcess::stdout_text() const {
    std::lock_guard lock(mu_);
    return out_;
}

RunningBinary start_binary(const std::string& listen, const Endpoint& upstream,
                           std::vector<std::string> extra, milliseconds startup) {
    std::vector<std::string> args = {"--listen", listen, "--upstream", upstream.to_string()};
    args.insert(args.end(), extra.begin(), extra.end());
    auto process = std::make_unique<BinaryProcess>(uring_fwd_binary(), std::move(args));
    auto endpoint = process->wait_listening(Deadline{startup});
    if (!endpoint) {
        throw std::runtime_error("uring-fwd did not report listening; stderr:\n" +
                                 process->stderr_text());
    }
    return RunningBinary{std::move(process), *endpoint};
}

} // namespace uringfwd::test
