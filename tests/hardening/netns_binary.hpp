// Starting the pieces of a namespace test where they belong: the uring-fwd binary in
// the proxy namespace (through `ip netns exec`, which execs, so the pid is the binary's)
// and listeners and client sockets in the others.
#pragma once

#include "tests/hardening/netns_topology.hpp"
#include "tests/support/binary_process.hpp"
#include "tests/support/sockets.hpp"

#include <string>
#include <vector>

namespace uringfwd::test {

// Throws with the captured stderr if the binary does not report it is listening.
RunningBinary start_binary_in(const std::string& ns, const std::string& listen,
                              const std::string& upstream, std::vector<std::string> extra = {});

// The binary with `--config PATH` (and `extra`) in `ns`; throws as start_binary_in does.
RunningBinary start_binary_with_config_in(const std::string& ns, const std::string& path,
                                          std::vector<std::string> extra = {});

// A listener bound inside `ns`.
Listener listen_in(const std::string& ns, const Endpoint& where);

// Connects from inside `ns`.
UniqueFd connect_from(const std::string& ns, const Endpoint& to,
                      milliseconds timeout = milliseconds{5000});

// `tc -s qdisc show dev LINK` inside `ns`, and the packets its root qdisc dropped.
std::string qdisc_stats(const std::string& ns, const std::string& link);
uint64_t qdisc_drops(const std::string& ns, const std::string& link);

} // namespace uringfwd::test
