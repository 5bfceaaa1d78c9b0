#include "cli/control/ctl.hpp"

#include "cli/control/command.hpp"
#include "ops/unique_fd.hpp"
#include "uringfwd/config_file.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace uringfwd::cli::control {
namespace {

// How long ctl waits for the reply: commands that ask every shard answer in
// microseconds; a stuck server must not hang a script.
constexpr int kReplyTimeoutSeconds = 30;
// A reply larger than this is cut (show connections with limit 10000 is ~2 MB).
constexpr std::size_t kMaxReplyBytes = 64u << 20;

int no_reply(const std::string& message) {
    std::fprintf(stderr, "uring-fwd ctl: %s\n", message.c_str());
    return kCtlNoReply;
}

// The socket path: --control, else the [engine] control of --config FILE.
std::optional<std::string> socket_path(const std::string& control, const std::string& config,
                                       std::string& problem) {
    if (!control.empty())
        return control;
    if (config.empty()) {
        problem = "no control socket: give --control PATH, or --config FILE whose [engine] "
                  "table sets control";
        return std::nullopt;
    }
    const ConfigFileResult loaded = load_config_file(config);
    if (!loaded.config) {
        problem = loaded.errors.empty() ? config + ": cannot be read" : loaded.errors.front();
        return std::nullopt;
    }
    if (loaded.operations.control.empty()) {
        problem = fmt::format("{} sets no control socket ([engine] control); give --control PATH",
                              config);
        return std::nullopt;
    }
    return loaded.operations.control;
}

} // namespace

int ctl_main(int argc, char** argv) {
    CLI::App app{"uring-fwd ctl: sends one command to a running uring-fwd's control socket and "
                 "prints the reply (exit status 0: done, 1: the reply is an error, 2: no reply)",
                 "uring-fwd ctl"};
    std::string control;
    std::string config;
    std::vector<std::string> words;
    app.add_option("--control", control, "the control socket (as the running process's --control)")
        ->type_name("PATH");
    app.add_option("-c,--config", config,
                   "read the socket's path from this configuration file's [engine] control");
    app.add_option("command", words, "the command and its words, e.g. show info; try: help")
        ->required();
    app.failure_message([](const CLI::App*, const CLI::Error& e) {
        return fmt::format("uring-fwd ctl: error: {} (see uring-fwd ctl --help)\n", e.what());
    });
    try {
        app.parse(argc - 1, argv + 1);
    } catch (const CLI::ParseError& e) {
        const int rc = app.exit(e);
        return rc == 0 ? kCtlOk : kCtlNoReply;
    }

    std::string line;
    for (const std::string& w : words) {
        if (w.find_first_of("\n\r") != std::string::npos)
            return no_reply("a command word cannot hold a line break");
        line += fmt::format("{}{}", line.empty() ? "" : " ", w);
    }
    if (line.size() + 1 > kMaxLineBytes)
        return no_reply(fmt::format("the command is longer than {} bytes", kMaxLineBytes - 1));
    line += '\n';

    std::string problem;
    const std::optional<std::string> path = socket_path(control, config, problem);
    if (!path)
        return no_reply(problem);
    sockaddr_un address{};
    if (path->size() >= sizeof(address.sun_path))
        return no_reply(fmt::format("control socket {}: the path is too long", *path));
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, path->data(), path->size());
    const ops::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd)
        return no_reply(fmt::format("socket: {}", std::strerror(errno)));
    timeval tv{kReplyTimeoutSeconds, 0};
    ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0)
        return no_reply(
            fmt::format("cannot connect to control socket {}: {}", *path, std::strerror(errno)));
    for (std::size_t sent = 0; sent < line.size();) {
        const ssize_t n = ::send(fd.get(), line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
        if (n <= 0)
            return no_reply(
                fmt::format("control socket {}: send: {}", *path, std::strerror(errno)));
        sent += static_cast<std::size_t>(n);
    }
    // The reply ends with an empty line: "...\n\n" (a reply is never empty).
    std::string reply;
    char buffer[65536];
    while (!(reply.size() >= 2 && reply.ends_with("\n\n"))) {
        const ssize_t n = ::recv(fd.get(), buffer, sizeof buffer, 0);
        if (n < 0)
            return no_reply(
                fmt::format("control socket {}: {}", *path,
                            errno == EAGAIN ? "no reply within 30 s" : std::strerror(errno)));
        if (n == 0)
            break; // closed: print what came (a refusal, a too-long line)
        reply.append(buffer, static_cast<std::size_t>(n));
        if (reply.size() > kMaxReplyBytes)
            return no_reply(fmt::format("control socket {}: reply longer than {} bytes", *path,
                                        kMaxReplyBytes));
    }
    if (reply.empty())
        return no_reply(fmt::format("control socket {}: closed without a reply", *path));
    if (reply.ends_with("\n\n"))
        reply.pop_back(); // the empty line that ends it
    const bool error = reply.starts_with("error: ");
    std::fputs(reply.c_str(), error ? stderr : stdout);
    return error ? kCtlCommandError : kCtlOk;
}

} // namespace uringfwd::cli::control
