// Three network namespaces joined by two veth links, for tests that need real links
// with their own MTU and queueing instead of loopback:
//
//   client ns: eth-c 10.200.1.2  <->  proxy ns: eth-pc 10.200.1.1
//                                     proxy ns: eth-pu 10.200.2.1  <->  upstream ns:
//                                     eth-u 10.200.2.2
//
// (IPv6 fd00:c8:1::/64 and fd00:c8:2::/64 as well on links whose MTU allows it.) The
// names carry this process's pid, and every namespace is deleted on destruction, so a
// failed test leaves nothing behind; namespaces left by a crashed earlier run are
// removed when the next one starts.
#pragma once

#include "tests/hardening/command.hpp"
#include "tests/support/unique_fd.hpp"

#include <string>
#include <vector>

namespace uringfwd::test {

struct NetnsOptions {
    int client_mtu = 1500;   // both ends of the client <-> proxy link
    int upstream_mtu = 1500; // both ends of the proxy <-> upstream link
};

class NetnsTopology {
public:
    // Addresses; each lives only inside the namespaces this class creates.
    static constexpr const char* kClient4 = "10.200.1.2";
    static constexpr const char* kProxyClientSide4 = "10.200.1.1";
    static constexpr const char* kProxyUpstreamSide4 = "10.200.2.1";
    static constexpr const char* kUpstream4 = "10.200.2.2";
    static constexpr const char* kNoHost4 = "10.200.2.99"; // on the upstream link, nobody
    static constexpr const char* kProxyClientSide6 = "fd00:c8:1::1";
    static constexpr const char* kUpstream6 = "fd00:c8:2::2";

    // Interface names (unique per namespace, so fixed names are enough).
    static constexpr const char* kClientLink = "eth-c";
    static constexpr const char* kProxyClientLink = "eth-pc";
    static constexpr const char* kProxyUpstreamLink = "eth-pu";
    static constexpr const char* kUpstreamLink = "eth-u";

    // Empty when namespaces and veths can be made here; otherwise why not (for
    // GTEST_SKIP). Probed once per process.
    static const std::string& unavailable_reason();
    // Same for the netem qdisc (a kernel built without sch_netem lacks it).
    static const std::string& netem_unavailable_reason();

    // Builds everything; throws std::runtime_error quoting the failing command.
    explicit NetnsTopology(NetnsOptions options = {});
    ~NetnsTopology();
    NetnsTopology(const NetnsTopology&) = delete;
    NetnsTopology& operator=(const NetnsTopology&) = delete;

    const std::string& client_ns() const { return client_; }
    const std::string& proxy_ns() const { return proxy_; }
    const std::string& upstream_ns() const { return upstream_; }

    // Runs `ip -n NS args...`-style tooling inside `ns` (ip netns exec); throws on failure.
    void exec_in(const std::string& ns, const std::vector<std::string>& argv) const;

private:
    void create();
    std::string client_;
    std::string proxy_;
    std::string upstream_;
    NetnsOptions options_;
    std::vector<std::string> created_;
};

// Moves the calling thread (only) into a namespace for its lifetime; sockets created
// meanwhile stay in that namespace after the thread moves back.
class NetnsEnter {
public:
    explicit NetnsEnter(const std::string& ns);
    ~NetnsEnter();
    NetnsEnter(const NetnsEnter&) = delete;
    NetnsEnter& operator=(const NetnsEnter&) = delete;

private:
    UniqueFd home_;
};

// Absolute path of a tool (posix_spawn does not search PATH); empty if not found.
std::string find_tool(const std::string& name);

} // namespace uringfwd::test
