// An upstream that never answers a connect, on loopback: a listener whose accept queue
// is full drops further SYNs (net/ipv4/tcp_input.c tcp_conn_request,
// sk_acceptq_is_full), so a connect to it times out as with a blackholed host.
#pragma once

#include "tests/support/sockets.hpp"
#include "tests/support/unique_fd.hpp"

#include <vector>

namespace uringfwd::test {

class Blackhole {
public:
    Blackhole();
    const Endpoint& endpoint() const { return listener_.endpoint(); }
    int fd() const { return listener_.fd(); }

private:
    Listener listener_;
    std::vector<UniqueFd> fillers_; // the connections that fill its queue
};

} // namespace uringfwd::test
