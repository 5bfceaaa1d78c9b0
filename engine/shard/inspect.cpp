#include "shard/inspect.hpp"

#include "routing/route_table.hpp"

namespace uringfwd::engine {

InspectorChain make_inspectors(const Route& route) {
    InspectorChain chain;
    // In the order they read: a PROXY header comes before anything the client sends.
    (void)route;
    return chain;
}

} // namespace uringfwd::engine
