#include "shard/inspect/inspect.hpp"

#include "routing/route_table.hpp"
#include "shard/inspect/proxy_inspector.hpp"

namespace uringfwd::engine {

InspectorChain make_inspectors(const Route& route) {
    InspectorChain chain;
    // In the order they read: a PROXY header comes before anything the client sends.
    if (route.accept_proxy)
        chain.push_back(std::make_unique<ProxyInspector>(route.trusted_sources, route.proxy_tlvs));
    return chain;
}

} // namespace uringfwd::engine
