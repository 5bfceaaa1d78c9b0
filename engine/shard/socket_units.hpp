// What a client holds of its shard's socket budget (shard_budget.cpp), taken when it
// is accepted (or handed over) and given back when its connection has closed: a unit
// of the connections the fd limit leaves room for, when it holds plain fds, and a unit
// of those the shard's registered file table leaves room for, when its sockets live in
// slots (direct descriptors). A unit stands for the client's socket and its upstream's.
#pragma once

namespace uringfwd::engine {

struct SocketUnits {
    bool fd = false;
    bool slot = false;
};

} // namespace uringfwd::engine
