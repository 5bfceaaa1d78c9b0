// The uring-fwd binary: flags or a configuration file in, Engine out. Uses only the public
// API, so an embedding application can do everything this file (and cli/flags/) does.
#include "uringfwd/engine.hpp"

#include "cli/config_loading.hpp"
#include "cli/connection_handover.hpp"
#include "cli/control/commands.hpp"
#include "cli/control/control_at_start.hpp"
#include "cli/control/control_server.hpp"
#include "cli/control/control_socket.hpp"
#include "cli/control/ctl.hpp"
#include "cli/flags/flags.hpp"
#include "cli/idle_timeout_warning.hpp"
#include "cli/process_log.hpp"
#include "cli/route_summary.hpp"
#include "cli/service_notify.hpp"
#include "cli/socket_activation.hpp"
#include "cli/upgrade.hpp"
#include "ops/access_log.hpp"
#include "ops/metrics_server.hpp"
#include "uringfwd/config_file.hpp"
#include "uringfwd/messages.hpp"
#include "uringfwd/version.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

namespace {

using uringfwd::count_of;
using uringfwd::cli::fail;
using Logger = uringfwd::cli::ProcessLog;

// Starts the successor of a binary upgrade (with --upgrade-socket). Not SIGUSR2, which
// reopens the access log as logrotate expects, nor SIGUSR1 (the stats line); a signal
// of the application's own that no terminal or tool sends by accident. A function, not
// a constant: glibc's SIGRTMIN is not a compile-time value.
int upgrade_signal() {
    return SIGRTMIN + 1;
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

// SIGUSR1: one line per shard and the total.
void print_stats(const uringfwd::Engine& engine) {
    const Logger log = uringfwd::cli::process_log();
    for (const uringfwd::ShardStats& s : engine.shard_stats())
        log.info("shard {} cpu {} node {}: {}", s.shard, s.cpu, s.node, s.counters.to_line());
    log.info("total: {}", engine.stats().to_line());
}

// The address a scraper uses: the bound port in place of 0.
std::string metrics_address(uringfwd::Endpoint address, uint16_t port) {
    address.port = port;
    if (address.host.empty())
        address.host = "0.0.0.0";
    return address.to_string();
}

// A successor started on the upgrade signal that ended (it failed to start: it logged why).
void reap_successor(pid_t& successor, const Logger& log) {
    int status = 0;
    if (successor > 0 && ::waitpid(successor, &status, WNOHANG) == successor) {
        log.warn("the successor process {} ended ({} {}); serving on", static_cast<int>(successor),
                 WIFEXITED(status) ? "exit status" : "signal",
                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        successor = -1;
    }
}

// The last line before a normal exit: why, with which status, and what the drain left.
void log_exit(const Logger& log, const std::string& why, const uringfwd::EngineStats& stats) {
    const uint64_t reset = stats.closed_drain_timeout + stats.closed_stopped;
    log.info("exit status 0: {}; {}", why,
             reset == 0 ? std::string("every connection finished")
                        : fmt::format("{} reset ({} at the drain timeout, {} by a second signal)",
                                      count_of(reset, "connection"), stats.closed_drain_timeout,
                                      stats.closed_stopped));
}

} // namespace

int main(int argc, char** argv) {
    // `uring-fwd ctl ...` is the client of a running process's control socket: a
    // command line of its own (cli/control/ctl.hpp).
    if (argc > 1 && std::strcmp(argv[1], "ctl") == 0)
        return uringfwd::cli::control::ctl_main(argc, argv);

    CLI::App app{"uring-fwd: forwards TCP and Unix stream connections with io_uring splice"};
    app.set_version_flag("--version", "uring-fwd " + std::string(uringfwd::version()));

    uringfwd::cli::Flags flags;
    uringfwd::cli::add_flags(app, flags);

    // One line per error, like every other message of ours.
    app.failure_message([](const CLI::App*, const CLI::Error& e) {
        return fmt::format("uring-fwd: error: {} (see --help)\n", e.what());
    });
    CLI11_PARSE(app, argc, argv);

    uringfwd::OperationsConfig operations;
    uringfwd::EngineConfig config = flags.config_path.empty()
                                        ? uringfwd::cli::config_from_flags(app, flags)
                                        : uringfwd::cli::config_from_file(app, flags, operations);
    uringfwd::cli::apply_operation_flags(app, flags, operations);
    const Logger log = uringfwd::cli::process_log();
    uringfwd::cli::control::ProcessFacts facts;
    facts.config_file = flags.config_path;
    facts.loaded_now();

    // A write to a socket the peer closed must come back as EPIPE, not kill us.
    signal(SIGPIPE, SIG_IGN);
    // Signals are taken synchronously by this thread (sigwait below); shard threads
    // inherit the blocked mask and never see them.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGUSR1);
    sigaddset(&signals, SIGHUP);
    sigaddset(&signals, SIGUSR2);
    sigaddset(&signals, upgrade_signal());
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);

    raise_fd_limit(); // the engine works out its room from the raised limit

    // Started before the engine (it is the engine's observer) and after the signal mask,
    // which its writer thread inherits.
    std::shared_ptr<uringfwd::ops::AccessLog> access_log;
    if (!operations.access_log.empty()) {
        try {
            access_log = std::make_shared<uringfwd::ops::AccessLog>(
                operations.access_log, operations.access_log_format, operations.access_log_flush);
        } catch (const std::exception& e) {
            fail(e.what());
        }
        config.observer = access_log;
    }
    // Listening sockets made for us: by systemd (socket activation), or by the process
    // we replace (binary upgrade). docs/service.md.
    const uringfwd::cli::ServiceNotifier notify;
    const uringfwd::cli::ActivatedSockets activated = uringfwd::cli::take_activated_sockets();
    config.inherited.inherited_listeners = activated.fds;
    std::optional<uringfwd::cli::UpgradeTakeover> takeover;
    if (!operations.upgrade_socket.empty()) {
        try {
            takeover = uringfwd::cli::UpgradeTakeover::connect(operations.upgrade_socket);
        } catch (const std::exception& e) {
            fail(e.what());
        }
        if (takeover) {
            std::vector<int> fds = takeover->fds();
            config.inherited.inherited_listeners.insert(config.inherited.inherited_listeners.end(),
                                                        fds.begin(), fds.end());
            // The old process lets go of every socket it handed us: serve them all, or
            // refuse (it then serves on as if nothing had happened).
            config.inherited.serve_every_inherited = true;
            log.info("upgrade: took {} from process {}", count_of(fds.size(), "listening socket"),
                     static_cast<int>(takeover->old_pid()));
        }
    }

    // The upgrade socket of a fresh start is bound before the engine starts: once the
    // engine says it listens (and systemd hears it is ready), a successor started at
    // once finds the socket and takes over rather than starting beside us. A process
    // that took over binds it only after the takeover (below): until then the path is
    // the old process's, which keeps serving if this start fails.
    std::optional<uringfwd::cli::UpgradeListener> upgrade;
    if (!operations.upgrade_socket.empty() && !takeover) {
        try {
            upgrade.emplace(operations.upgrade_socket);
        } catch (const std::exception& e) {
            fail(e.what());
        }
    }
    std::optional<uringfwd::cli::control::ControlSocket> control_socket;
    try {
        control_socket = uringfwd::cli::control::open_control_socket(operations, takeover);
    } catch (const std::exception& e) {
        fail(e.what());
    }

    std::unique_ptr<uringfwd::Engine> engine;
    try {
        engine = uringfwd::Engine::start(config);
    } catch (const uringfwd::StartError& e) {
        control_socket.reset(); // fail() exits without running destructors
        // A failed upgrade leaves the old process serving: closing our end tells it.
        if (takeover)
            fail(fmt::format("upgrade: {}; process {} serves on", e.what(),
                             static_cast<int>(takeover->old_pid())));
        fail(e.what());
    }
    for (int fd : activated.fds)
        ::close(fd); // the engine holds its own dups
    if (!activated.fds.empty())
        log.info("socket activation: {} passed",
                 count_of(activated.fds.size(), "listening socket"));
    std::unique_ptr<uringfwd::ops::MetricsServer> metrics;
    if (operations.metrics) {
        try {
            metrics = std::make_unique<uringfwd::ops::MetricsServer>(*operations.metrics, *engine,
                                                                     access_log.get());
        } catch (const std::exception& e) {
            engine->stop(std::chrono::milliseconds{0});
            engine->wait();
            control_socket.reset(); // fail() exits without running destructors
            fail(e.what());
        }
        log.info("metrics at http://{}/metrics",
                 metrics_address(*operations.metrics, metrics->port()));
    }
    // Served from here to the exit, draining included (`show connections` then says
    // what is left). Before `engine` goes: its commands use it.
    std::unique_ptr<uringfwd::cli::control::ControlServer> control;
    if (control_socket) {
        const std::string path = control_socket->path();
        control = std::make_unique<uringfwd::cli::control::ControlServer>(
            std::move(*control_socket),
            [&engine, &facts](const uringfwd::cli::control::Command& command) {
                return uringfwd::cli::control::run_command(command, *engine, facts);
            });
        control_socket.reset();
        log.info("control socket at {}", path);
    }
    // The room the engine worked out from the fd limit (or the file tables), which it
    // enforces: clients beyond it wait in the listen backlog.
    const uringfwd::EngineInfo info = engine->info();
    const uringfwd::ConnectionRoom& room = info.room;
    std::string description = uringfwd::describe_serving(info);
    for (std::size_t i = 0; i < info.shards.size(); ++i)
        description += fmt::format("; shard {}: {}", i, uringfwd::describe(info.shards[i]));
    if (room.direct)
        log.info("version {}; {}; fd limit {} (direct descriptors: room for {} per shard)",
                 uringfwd::version(), description, static_cast<unsigned long long>(room.fd_limit),
                 count_of(room.connections_per_shard, "connection"));
    else
        log.info("version {}; {}; fd limit {} (room for {}; pipes per shard: {})",
                 uringfwd::version(), description, static_cast<unsigned long long>(room.fd_limit),
                 count_of(room.connections, "connection"), room.pipes_per_shard);

    if (const std::string warning =
            uringfwd::cli::idle_timeout_warning(config, !flags.config_path.empty());
        !warning.empty())
        log.warn("{}", warning);

    // Every shard accepts now (Engine::start returns then). Under systemd an upgraded
    // process becomes the main one before the old one lets go.
    const std::string serving = "serving: " + uringfwd::describe_serving(info);
    // Declared after `engine`, so it stops before the engine goes.
    std::unique_ptr<uringfwd::cli::ConnectionReceiver> receiver;
    if (takeover) {
        notify.main_pid_ready(serving);
        const bool released =
            takeover->finish(log, operations.handover == uringfwd::UpgradeHandover::Connections);
        // A client whose wake-up went to the old process's cancelled accept is still
        // queued: take it now (Engine::rearm_listeners()).
        engine->rearm_listeners();
        if (released)
            log.info("upgrade: process {} stopped accepting and drains",
                     static_cast<int>(takeover->old_pid()));
        // Its control socket is ours now, file and all (the old process leaves it).
        if (released && control && takeover->took_control_socket())
            control->own_file();
        // Its connections follow on the same socket when it offered them and we took them.
        if (uringfwd::ops::UniqueFd conversation = takeover->take_conversation();
            released && conversation)
            receiver = std::make_unique<uringfwd::cli::ConnectionReceiver>(
                std::move(conversation), *engine, log, takeover->old_pid());
        takeover.reset();
    } else {
        notify.ready(serving);
    }
    if (metrics)
        metrics->set_readiness(uringfwd::ops::Readiness::Ready);
    if (!operations.upgrade_socket.empty() && !upgrade) {
        // After the takeover: the old process's socket until now. It is still in use
        // when the old process did not let go (its "released" never came): serving
        // already, this process does not exit for want of it, nor take the path from
        // under a process that accepts on it.
        try {
            upgrade.emplace(operations.upgrade_socket);
        } catch (const std::exception& e) {
            log.warn("{}; this process takes no successor (SIGRTMIN+1 is ignored)", e.what());
        }
    }
    pid_t successor = -1;
    std::unique_ptr<uringfwd::cli::ConnectionSender> sender; // hands connections over

    // The first SIGTERM/SIGINT stops accepting and lets connections drain; a second one
    // resets what is left. Waiting with a timeout lets us notice when the drain is over.
    bool stopping = false;
    std::string stopped_by; // for the exit line
    for (;;) {
        timespec tick{0, 100 * 1000 * 1000};
        int sig = sigtimedwait(&signals, nullptr, &tick);
        if (sig == SIGUSR1) {
            print_stats(*engine);
        } else if (sig == SIGUSR2) {
            // logrotate has renamed the file: lines buffered go to it, the rest to a
            // new file at the path.
            if (access_log)
                access_log->reopen();
        } else if (sig == SIGHUP && !stopping) {
            uringfwd::cli::reload(*engine, app, flags, config, operations, facts, notify, log);
        } else if (sig == upgrade_signal() && !stopping) {
            if (!upgrade)
                log.warn("SIGRTMIN+1: no --upgrade-socket; ignored");
            else if (successor > 0)
                log.warn("SIGRTMIN+1: process {} is already starting", static_cast<int>(successor));
            else
                successor = uringfwd::cli::start_successor(argv, log);
        } else if ((sig == SIGINT || sig == SIGTERM) && !stopping) {
            stopping = true;
            stopped_by = fmt::format("stopped by {}", sig == SIGINT ? "SIGINT" : "SIGTERM");
            notify.stopping("draining: no new connections");
            if (metrics)
                metrics->set_readiness(uringfwd::ops::Readiness::Draining);
            log.info("{}: no new connections; open ones may finish within {}",
                     sig == SIGINT ? "SIGINT" : "SIGTERM",
                     uringfwd::cli::default_duration(config.drain_timeout));
            engine->stop();
        } else if (sig == SIGINT || sig == SIGTERM) {
            log.warn("second signal: resetting open connections");
            engine->stop(std::chrono::milliseconds{0});
        }
        reap_successor(successor, log);
        if (!stopping && upgrade &&
            upgrade->serve_successor(*engine, log, control ? control->listen_fd() : -1,
                                     control ? control->path() : std::string(),
                                     operations.handover ==
                                         uringfwd::UpgradeHandover::Connections)) {
            // The successor accepts on our sockets and is the main process: no
            // STOPPING=1 from us, which would stop the service.
            if (control && upgrade->successor_took_control())
                control->hand_over(); // it answers there now, and removes the file
            if (metrics)
                metrics->set_readiness(uringfwd::ops::Readiness::Draining);
            stopping = true;
            stopped_by = "a successor took over";
            // Connections it takes go as they become quiet; what never does drains.
            if (uringfwd::ops::UniqueFd conversation = upgrade->take_conversation())
                sender = std::make_unique<uringfwd::cli::ConnectionSender>(
                    std::move(conversation), *engine, log, upgrade->successor_pid(),
                    upgrade->successor_takes_pipes());
            engine->stop();
        }
        if (stopping && engine->stopped() && (!sender || sender->done()))
            break;
    }
    engine->wait();
    sender.reset();
    control.reset(); // removes the socket file, unless a successor has it
    metrics.reset();
    if (access_log)
        access_log->stop(); // every line of every connection closed
    log_exit(log, stopped_by, engine->stats());
    return 0;
}
