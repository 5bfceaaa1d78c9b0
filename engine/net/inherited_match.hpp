// Which inherited listening sockets (socket activation, a binary upgrade) serve which
// listen address, and which of them each shard accepts on. Pure: the sockets are
// described by the caller (engine/api/inherited.cpp), so this is unit-tested.
#pragma once

#include "uringfwd/endpoint.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace uringfwd::engine {

struct InheritedSocket {
    int fd = -1;
    Endpoint address;      // getsockname(), as an Endpoint
    uint64_t identity = 0; // the socket object (st_dev, st_ino): dups compare equal
};

struct InheritedPlan {
    // Per listen address, in `listen`'s order: the distinct sockets bound to it, each
    // once (the first fd given for it), in the order given.
    std::vector<std::vector<int>> per_listener;
    // Sockets bound to no listen address, for a warning.
    std::vector<InheritedSocket> unmatched;
};

InheritedPlan match_inherited(const std::vector<Endpoint>& listen,
                              const std::vector<InheritedSocket>& sockets);

// The fd shard `shard` (of `shards`) accepts on for one address: the only socket when
// there is one (every shard shares it), the shard's own when there is one per shard,
// -1 when none was inherited (bind as usual). Any other count throws
// std::invalid_argument naming `address`: we cannot leave a socket of an SO_REUSEPORT
// group unserved (the kernel keeps routing clients to it) nor split one unevenly.
int inherited_for_shard(const std::vector<int>& fds, std::size_t shard, std::size_t shards,
                        const Endpoint& address);

} // namespace uringfwd::engine
