#include "tests/hardening/netns_binary.hpp"

#include <stdexcept>

namespace uringfwd::test {

namespace {
RunningBinary start_in(const std::string& ns, std::vector<std::string> binary_args) {
    std::vector<std::string> args = {"netns", "exec", ns, uring_fwd_binary()};
    args.insert(args.end(), binary_args.begin(), binary_args.end());
    auto process = std::make_unique<BinaryProcess>(find_tool("ip"), std::move(args));
    auto endpoint = process->wait_listening(Deadline{milliseconds{10000}});
    if (!endpoint) {
        throw std::runtime_error("uring-fwd did not report listening in " + ns + "; stderr:\n" +
                                 process->stderr_text());
    }
    return RunningBinary{std::move(process), *endpoint};
}
} // namespace

RunningBinary start_binary_in(const std::string& ns, const std::string& listen,
                              const std::string& upstream, std::vector<std::string> extra) {
    std::vector<std::string> args = {"--listen", listen, "--upstream", upstream};
    args.insert(args.end(), extra.begin(), extra.end());
    return start_in(ns, std::move(args));
}

RunningBinary start_binary_with_config_in(const std::string& ns, const std::string& path,
                                          std::vector<std::string> extra) {
    std::vector<std::string> args = {"--config", path};
    args.insert(args.end(), extra.begin(), extra.end());
    return start_in(ns, std::move(args));
}

Listener listen_in(const std::string& ns, const Endpoint& where) {
    NetnsEnter inside{ns};
    return listen_on(where);
}

UniqueFd connect_from(const std::string& ns, const Endpoint& to, milliseconds timeout) {
    NetnsEnter inside{ns};
    return connect_to(to, timeout);
}

std::string qdisc_stats(const std::string& ns, const std::string& link) {
    return run_command({"ip", "netns", "exec", ns, "tc", "-s", "qdisc", "show", "dev", link})
        .output;
}

uint64_t qdisc_drops(const std::string& ns, const std::string& link) {
    // " Sent 123 bytes 4 pkt (dropped 5, overlimits 6 requeues 0)"
    const std::string text = qdisc_stats(ns, link);
    const auto pos = text.find("dropped ");
    return pos == std::string::npos ? 0 : std::stoull(text.substr(pos + 8));
}

} // namespace uringfwd::test
