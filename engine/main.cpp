// The uring-fwd binary: flags in, Engine out. Uses only the public API, so an
// embedding application can do everything this file does.
#include "uringfwd/engine.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <signal.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>

#ifndef URING_FWD_VERSION
#define URING_FWD_VERSION "unknown"
#endif

namespace {

[[noreturn]] void fail(const std::string& message) {
    std::fprintf(stderr, "uring-fwd: error: %s\n", message.c_str());
    std::exit(1);
}

// Each connection holds two sockets, each pipe two fds. Raising the soft limit to the
// hard one is what every server does at start; going past the hard limit needs
// privileges we do not assume.
rlim_t raise_fd_limit() {
    rlimit lim{};
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0)
        return 0;
    if (lim.rlim_cur < lim.rlim_max) {
        lim.rlim_cur = lim.rlim_max;
        setrlimit(RLIMIT_NOFILE, &lim);
        getrlimit(RLIMIT_NOFILE, &lim);
    }
    return lim.rlim_cur;
}

uringfwd::Endpoint parse_endpoint(const std::string& flag, const std::string& text) {
    try {
        return uringfwd::Endpoint::parse(text);
    } catch (const std::invalid_argument& e) {
        fail(fmt::format("{}: {}", flag, e.what()));
    }
}

} // namespace

int main(int argc, char** argv) {
    CLI::App app{"uring-fwd: forwards TCP and Unix stream connections with io_uring splice"};
    app.set_version_flag("--version", std::string("uring-fwd ") + URING_FWD_VERSION);

    std::string listen_text;
    std::string upstream_text;
    std::string log_level_text = "info";
    uringfwd::EngineConfig config;
    long connect_timeout_ms = 5000;

    app.add_option("-l,--listen", listen_text,
                   "address to accept clients on: 127.0.0.1:9000, [::1]:9000, unix:/path")
        ->required();
    app.add_option("-u,--upstream", upstream_text, "address to forward to (same forms)")
        ->required();
    app.add_option("--connect-timeout", connect_timeout_ms,
                   "give up on an upstream connect after this long (ms, or with a unit: 5s)")
        ->transform(CLI::AsNumberWithUnit(std::map<std::string, long>{{"ms", 1}, {"s", 1000}},
                                          CLI::AsNumberWithUnit::CASE_SENSITIVE))
        ->check(CLI::Range(1L, 3600L * 1000))
        ->default_str("5s");
    app.add_option("--max-pipes", config.max_pipes,
                   "pipes per shard at most; a direction that finds none waits for one")
        ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20))
        ->capture_default_str();
    app.add_option("--pipe-size", config.pipe_size,
                   "pipe capacity to ask for in bytes (default: /proc/sys/fs/pipe-max-size)")
        ->check(CLI::Range(std::size_t{4096}, std::size_t{1} << 30));
    app.add_option("--log-level", log_level_text, "error, warn, info or debug")
        ->capture_default_str();

    CLI11_PARSE(app, argc, argv);

    config.listen = parse_endpoint("--listen", listen_text);
    config.upstream = parse_endpoint("--upstream", upstream_text);
    config.connect_timeout = std::chrono::milliseconds(connect_timeout_ms);
    auto level = uringfwd::parse_log_level(log_level_text);
    if (!level)
        fail(fmt::format("--log-level: \"{}\" is not one of error, warn, info, debug",
                         log_level_text));
    config.log_level = *level;

    // A write to a socket the peer closed must come back as EPIPE, not kill us.
    signal(SIGPIPE, SIG_IGN);
    // Signals are taken synchronously by this thread (sigwait below); shard threads
    // inherit the blocked mask and never see them.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);

    rlim_t fd_limit = raise_fd_limit();

    std::unique_ptr<uringfwd::Engine> engine;
    try {
        engine = uringfwd::Engine::start(config);
    } catch (const uringfwd::StartError& e) {
        fail(e.what());
    }
    // Each connection takes two fds, each pipe two; keep a few for the rest.
    long pipe_fds = static_cast<long>(config.max_pipes) * 2;
    long room = (static_cast<long>(fd_limit) - pipe_fds - 16) / 2;
    std::fprintf(stderr, "uring-fwd %s: %s; fd limit %llu (room for about %ld connections)\n",
                 URING_FWD_VERSION, engine->describe().c_str(),
                 static_cast<unsigned long long>(fd_limit), room > 0 ? room : 0);

    int sig = 0;
    while (sigwait(&signals, &sig) == 0) {
        if (sig == SIGINT || sig == SIGTERM)
            break;
    }
    std::fprintf(stderr, "uring-fwd: %s received, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    engine->stop();
    engine->wait();
    return 0;
}
