// The built uring-fwd binary as a child process: spawned with given arguments, its
// stdout/stderr captured (drained continuously so it never blocks on a full pipe),
// terminated on destruction with SIGTERM (drain), a second SIGTERM after a second
// (reset what is left) and SIGKILL as a last resort, then reaped.
#pragma once

#include "tests/support/deadline.hpp"
#include "tests/support/unique_fd.hpp"
#include "uringfwd/endpoint.hpp"

#include <sys/types.h>

#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace uringfwd::test {

struct ExitStatus {
    bool exited = false; // normal exit (then `code`), otherwise killed by `signal`
    int code = 0;
    int signal = 0;
    std::string describe() const;
};

// What a service manager gives a process besides its arguments.
struct SpawnOptions {
    // "KEY=VALUE" added to (or replacing in) the test's environment: NOTIFY_SOCKET.
    std::vector<std::string> env;
    // Passed as fds 3, 4, ... with LISTEN_FDS and LISTEN_PID set to the child's pid, as
    // systemd does for socket activation (sd_listen_fds(3)). The child's pid is not
    // known before it exists, so the child is started through /bin/sh, which sets
    // LISTEN_PID=$$ and execs the binary in the same process.
    std::vector<int> listen_fds;
};

class BinaryProcess {
public:
    // Spawns URING_FWD_BINARY-style `path` with `args` (argv[0] is added). Throws if the
    // spawn itself fails.
    BinaryProcess(const std::string& path, std::vector<std::string> args,
                  const SpawnOptions& options = {});
    ~BinaryProcess();
    BinaryProcess(const BinaryProcess&) = delete;
    BinaryProcess& operator=(const BinaryProcess&) = delete;

    pid_t pid() const { return pid_; }

    // Waits for a stderr line containing "listening on " and parses the endpoint that
    // follows. nullopt if the process exits or the deadline passes first.
    std::optional<Endpoint> wait_listening(const Deadline& deadline);

    // Waits for the process to exit by itself.
    std::optional<ExitStatus> wait_exit(const Deadline& deadline);

    // Sends `sig` (no-op once reaped).
    void signal(int sig);

    std::string stderr_text() const;
    std::string stdout_text() const;
    // Whether `text` appears in its stderr before `deadline` (polled).
    bool logs(const std::string& text, const Deadline& deadline) const;

private:
    void drain_loop();
    bool try_reap(bool block);

    pid_t pid_ = -1;
    std::optional<ExitStatus> status_;
    UniqueFd out_read_;
    UniqueFd err_read_;
    UniqueFd cancel_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::string out_;
    std::string err_;
    bool streams_closed_ = false;
    std::thread drainer_;
};

// The binary built alongside the tests (URING_FWD_BINARY from meson).
const std::string& uring_fwd_binary();

// Starts the binary forwarding `--listen listen --upstream upstream` plus `extra` args
// and waits (bounded) until it reports it is listening. Throws with the captured stderr
// if it does not.
struct RunningBinary {
    std::unique_ptr<BinaryProcess> process;
    Endpoint endpoint;
};
RunningBinary start_binary(const std::string& listen, const Endpoint& upstream,
                           std::vector<std::string> extra = {},
                           milliseconds startup = milliseconds{10000});

} // namespace uringfwd::test
