// The inspector of a listen address shared by routes told apart by the TLS ClientHello
// (routing/sni_router.hpp): it reads the hello (protocol/client_hello.hpp), never
// consumes a byte (the whole hello is replayed to the upstream, which terminates TLS),
// and chooses the route.
//
//   hello read          -> the matching route; none and no default: reset, no_route
//   first byte not 22   -> the default route at once (not TLS: never delayed further)
//   malformed hello     -> reset, tls_malformed (too large: inspect_oversized)
//   incomplete          -> more bytes, until inspect_timeout or the 16 KiB cap
#pragma once

#include "routing/sni_router.hpp"
#include "shard/inspect/inspect.hpp"

#include <memory>

namespace uringfwd::engine {

std::shared_ptr<const Inspector> make_sni_inspector(std::shared_ptr<const SniRouter> router);

} // namespace uringfwd::engine
