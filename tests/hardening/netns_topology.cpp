#include "tests/hardening/netns_topology.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <fmt/core.h>
#include <sstream>
#include <stdexcept>
#include <system_error>

namespace uringfwd::test {
namespace {

constexpr const char* kPrefix = "h4fwd-";

std::atomic<int> next_topology{0};

// Namespaces named h4fwd-PID-... whose PID no longer runs were left by a crashed run.
void remove_stale_namespaces() {
    const CommandResult list = run_command({"ip", "netns", "list"});
    std::istringstream lines(list.output);
    std::string line;
    while (std::getline(lines, line)) {
        const std::string name = line.substr(0, line.find(' '));
        if (name.rfind(kPrefix, 0) != 0) {
            continue;
        }
        const std::string rest = name.substr(std::string(kPrefix).size());
        const pid_t owner = static_cast<pid_t>(std::atol(rest.c_str()));
        if (owner > 0 && owner != ::getpid() && ::kill(owner, 0) != 0 && errno == ESRCH) {
            run_command({"ip", "netns", "del", name});
        }
    }
}

std::string run_or_reason(const std::vector<std::string>& argv) {
    const CommandResult r = run_command(argv);
    return r.ok() ? std::string() : fmt::format("`{}` failed: {}", join_command(argv), r.output);
}

std::string probe(bool with_netem) {
    if (find_tool("ip").empty()) {
        return "the ip tool (iproute2) is not installed";
    }
    if (with_netem && find_tool("tc").empty()) {
        return "the tc tool (iproute2) is not installed";
    }
    const std::string ns = fmt::format("{}{}-probe{}", kPrefix, ::getpid(), with_netem ? "q" : "");
    std::string reason = run_or_reason({"ip", "netns", "add", ns});
    if (!reason.empty()) {
        return reason + " (needs CAP_SYS_ADMIN/CAP_NET_ADMIN)";
    }
    reason =
        run_or_reason({"ip", "-n", ns, "link", "add", "pa", "type", "veth", "peer", "name", "pb"});
    if (reason.empty() && with_netem) {
        reason = run_or_reason({"ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "pa",
                                "root", "netem", "delay", "1ms"});
        if (!reason.empty()) {
            reason += " (kernel without sch_netem?)";
        }
    }
    run_command({"ip", "netns", "del", ns});
    return reason;
}

} // namespace

std::string find_tool(const std::string& name) {
    for (const char* dir : {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"}) {
        const std::string path = std::string(dir) + name;
        if (::access(path.c_str(), X_OK) == 0) {
            return path;
        }
    }
    return {};
}

const std::string& NetnsTopology::unavailable_reason() {
    static const std::string reason = [] {
        remove_stale_namespaces();
        return probe(false);
    }();
    return reason;
}

const std::string& NetnsTopology::netem_unavailable_reason() {
    static const std::string reason = [] {
        const std::string& base = unavailable_reason();
        return base.empty() ? probe(true) : base;
    }();
    return reason;
}

NetnsTopology::NetnsTopology(NetnsOptions options) : options_(options) {
    const int id = next_topology.fetch_add(1);
    const std::string stem = fmt::format("{}{}-{}-", kPrefix, ::getpid(), id);
    client_ = stem + "c";
    proxy_ = stem + "p";
    upstream_ = stem + "u";
    try {
        create();
    } catch (...) {
        for (const auto& ns : created_) {
            run_command({"ip", "netns", "del", ns});
        }
        throw;
    }
}

NetnsTopology::~NetnsTopology() {
    // Deleting a namespace destroys its veth ends and any socket left in it.
    for (const auto& ns : created_) {
        run_command({"ip", "netns", "del", ns});
    }
}

void NetnsTopology::exec_in(const std::string& ns, const std::vector<std::string>& argv) const {
    std::vector<std::string> full = {"ip", "netns", "exec", ns};
    full.insert(full.end(), argv.begin(), argv.end());
    const CommandResult r = run_command(full);
    if (!r.ok()) {
        throw std::runtime_error(fmt::format("`{}` failed: {}", join_command(full), r.output));
    }
}

void NetnsTopology::create() {
    auto ip = [](const std::vector<std::string>& args) {
        std::vector<std::string> argv = {"ip"};
        argv.insert(argv.end(), args.begin(), args.end());
        const CommandResult r = run_command(argv);
        if (!r.ok()) {
            throw std::runtime_error(fmt::format("`{}` failed: {}", join_command(argv), r.output));
        }
    };
    for (const auto* ns : {&client_, &proxy_, &upstream_}) {
        ip({"netns", "add", *ns});
        created_.push_back(*ns);
        ip({"-n", *ns, "link", "set", "lo", "up"});
    }
    // Each veth is born in the proxy namespace with its peer placed straight into the
    // other one, so no interface ever appears in the namespace the tests run in.
    ip({"-n", proxy_, "link", "add", kProxyClientLink, "type", "veth", "peer", "name", kClientLink,
        "netns", client_});
    ip({"-n", proxy_, "link", "add", kProxyUpstreamLink, "type", "veth", "peer", "name",
        kUpstreamLink, "netns", upstream_});

    struct End {
        const std::string& ns;
        const char* link;
        const char* addr4;
        const char* addr6;
        int mtu;
    };
    const End ends[] = {
        {client_, kClientLink, kClient4, "fd00:c8:1::2", options_.client_mtu},
        {proxy_, kProxyClientLink, kProxyClientSide4, kProxyClientSide6, options_.client_mtu},
        {proxy_, kProxyUpstreamLink, kProxyUpstreamSide4, "fd00:c8:2::1", options_.upstream_mtu},
        {upstream_, kUpstreamLink, kUpstream4, kUpstream6, options_.upstream_mtu},
    };
    for (const End& e : ends) {
        ip({"-n", e.ns, "link", "set", "dev", e.link, "mtu", std::to_string(e.mtu)});
        ip({"-n", e.ns, "addr", "add", std::string(e.addr4) + "/24", "dev", e.link});
        // IPv6 needs an MTU of at least 1280; "nodad" makes the address usable at once
        // instead of after duplicate address detection.
        if (e.mtu >= 1280) {
            ip({"-n", e.ns, "addr", "add", std::string(e.addr6) + "/64", "dev", e.link, "nodad"});
        }
        ip({"-n", e.ns, "link", "set", "dev", e.link, "up"});
    }
    // The ends reach each other only through the proxy's addresses; default routes
    // make any other destination fail fast with "unreachable" rather than silently.
    ip({"-n", client_, "route", "add", "default", "via", kProxyClientSide4});
    ip({"-n", upstream_, "route", "add", "default", "via", kProxyUpstreamSide4});
}

NetnsEnter::NetnsEnter(const std::string& ns)
    : home_(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) {
    if (!home_) {
        throw std::system_error(errno, std::generic_category(), "open /proc/thread-self/ns/net");
    }
    UniqueFd target{::open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC)};
    if (!target || ::setns(target.get(), CLONE_NEWNET) != 0) {
        throw std::system_error(errno, std::generic_category(), "setns into " + ns);
    }
}

NetnsEnter::~NetnsEnter() {
    // Failing to return would leave the test thread in a namespace about to vanish.
    if (::setns(home_.get(), CLONE_NEWNET) != 0) {
        std::abort();
    }
}

} // namespace uringfwd::test
