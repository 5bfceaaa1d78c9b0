// The uring-fwd binary: flags in, Engine out. Uses only the public API, so an
// embedding application can do everything this file does.
#include "uringfwd/engine.hpp"

#include "uringfwd/cpu_list.hpp"
#include "uringfwd/numa_topology.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <signal.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
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

std::vector<int> parse_cpus(const std::string& flag, const std::string& text) {
    try {
        return uringfwd::parse_cpu_list(text);
    } catch (const std::invalid_argument& e) {
        fail(fmt::format("{}: {}", flag, e.what()));
    }
}

// --numa-node: the CPUs of those nodes, further limited by --cpus when both are given.
std::vector<int> cpus_of_nodes(const std::string& nodes_text, const std::vector<int>& cpus) {
    std::vector<int> nodes = parse_cpus("--numa-node", nodes_text);
    std::vector<int> from_nodes;
    try {
        from_nodes = uringfwd::read_numa_topology().cpus_of_nodes(nodes);
    } catch (const std::exception& e) {
        fail(fmt::format("--numa-node: {}", e.what()));
    }
    if (cpus.empty())
        return from_nodes;
    std::vector<int> both;
    for (int cpu : cpus)
        if (std::find(from_nodes.begin(), from_nodes.end(), cpu) != from_nodes.end())
            both.push_back(cpu);
    if (both.empty())
        fail("--cpus and --numa-node have no CPU in common");
    return both;
}

void print_stats(const uringfwd::Engine& engine) {
    for (const uringfwd::ShardStats& s : engine.shard_stats())
        std::fprintf(stderr, "uring-fwd: shard %d cpu %d node %d: %s\n", s.shard, s.cpu, s.node,
                     s.counters.to_line().c_str());
    std::fprintf(stderr, "uring-fwd: total: %s\n", engine.stats().to_line().c_str());
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
    long drain_timeout_ms = 30000;
    long busy_poll_us = 0;
    std::string cpus_text;
    std::string nodes_text;
    bool no_steering = false;
    std::string iowq_text = "cpu";
    std::string data_path_text = "auto";

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
    app.add_option("--shards", config.shards,
                   "number of shards, one thread pinned per CPU (default: one per CPU allowed)");
    app.add_option("--cpus", cpus_text, "CPUs to run shards on, e.g. 0-7,16-23");
    app.add_option("--numa-node", nodes_text, "run shards only on these NUMA nodes' CPUs, e.g. 0");
    app.add_flag("--no-steering", no_steering,
                 "spread connections by the kernel's hash, not by the CPU that received them");
    app.add_option("--iowq-cpus", iowq_text,
                   "where a shard's io-wq workers run: cpu (its own) or node (its NUMA node)")
        ->check(CLI::IsMember({"cpu", "node"}))
        ->capture_default_str();
    app.add_option("--iowq-max-workers", config.iowq_max_workers,
                   "most io-wq kernel threads per shard (default: max-pipes + 4)")
        ->check(CLI::Range(1u, 1u << 16));
    app.add_option("--data-path", data_path_text,
                   "how bytes move: splice (zero-copy, via io-wq kernel threads), copy "
                   "(receive + send, inline) or auto (per direction: copy small messages, "
                   "splice bulk)")
        ->check(CLI::IsMember({"splice", "copy", "auto"}))
        ->capture_default_str();
    app.add_option("--copy-buffers", config.copy_buffers,
                   "copy-path buffers of 32 KiB per shard, a power of two; a copying direction "
                   "holds at most two, and none while idle")
        ->check(CLI::Range(1u, 32768u))
        ->capture_default_str();
    app.add_option("--busy-poll", busy_poll_us,
                   "low-latency mode: poll for up to this long before sleeping (us, or with a "
                   "unit: 50us, 1ms); costs CPU; 0 = off")
        ->transform(CLI::AsNumberWithUnit(std::map<std::string, long>{{"us", 1}, {"ms", 1000}},
                                          CLI::AsNumberWithUnit::CASE_SENSITIVE))
        ->check(CLI::Range(0L, 1000L * 1000))
        ->default_str("0");
    app.add_option("--drain-timeout", drain_timeout_ms,
                   "on SIGTERM/SIGINT, let open connections finish this long (ms, or 30s); a "
                   "second signal resets them at once")
        ->transform(CLI::AsNumberWithUnit(std::map<std::string, long>{{"ms", 1}, {"s", 1000}},
                                          CLI::AsNumberWithUnit::CASE_SENSITIVE))
        ->check(CLI::Range(0L, 24L * 3600 * 1000))
        ->default_str("30s");

    // One line per error, like every other message of ours.
    app.failure_message([](const CLI::App*, const CLI::Error& e) {
        return fmt::format("uring-fwd: error: {} (see --help)\n", e.what());
    });
    CLI11_PARSE(app, argc, argv);

    config.listen = parse_endpoint("--listen", listen_text);
    config.upstream = parse_endpoint("--upstream", upstream_text);
    config.connect_timeout = std::chrono::milliseconds(connect_timeout_ms);
    config.drain_timeout = std::chrono::milliseconds(drain_timeout_ms);
    config.busy_poll = std::chrono::microseconds(busy_poll_us);
    if (!cpus_text.empty())
        config.cpus = parse_cpus("--cpus", cpus_text);
    if (!nodes_text.empty())
        config.cpus = cpus_of_nodes(nodes_text, config.cpus);
    config.steer_by_cpu = !no_steering;
    config.worker_placement = iowq_text == "node"
                                  ? uringfwd::EngineConfig::WorkerPlacement::ShardNode
                                  : uringfwd::EngineConfig::WorkerPlacement::ShardCpu;
    config.data_path = *uringfwd::parse_data_path(data_path_text); // checked above
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
    sigaddset(&signals, SIGUSR1);
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

    // The first SIGTERM/SIGINT stops accepting and lets connections drain; a second one
    // resets what is left. Waiting with a timeout lets us notice when the drain is over.
    bool stopping = false;
    for (;;) {
        timespec tick{0, 100 * 1000 * 1000};
        int sig = sigtimedwait(&signals, nullptr, &tick);
        if (sig == SIGUSR1) {
            print_stats(*engine);
        } else if ((sig == SIGINT || sig == SIGTERM) && !stopping) {
            stopping = true;
            std::fprintf(stderr,
                         "uring-fwd: %s: no new connections; open ones may finish within %ld ms\n",
                         sig == SIGINT ? "SIGINT" : "SIGTERM", drain_timeout_ms);
            engine->stop();
        } else if (sig == SIGINT || sig == SIGTERM) {
            std::fprintf(stderr, "uring-fwd: second signal: resetting open connections\n");
            engine->stop(std::chrono::milliseconds{0});
        }
        if (stopping && engine->stopped())
            break;
    }
    engine->wait();
    return 0;
}
