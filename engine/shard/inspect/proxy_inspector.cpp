#include "shard/inspect/proxy_inspector.hpp"

#include "protocol/proxy_header.hpp"

#include <algorithm>

namespace uringfwd::engine {

bool ProxyInspector::trusted(const SocketAddress& peer) const {
    if (trusted_.empty())
        return true;
    return std::any_of(trusted_.begin(), trusted_.end(),
                       [&](const Cidr& cidr) { return cidr.contains(peer.storage); });
}

InspectVerdict ProxyInspector::inspect(const InspectInput& input) const {
    // A header is a claim about who the client is: only those allowed to make it are
    // read at all (doc/proxy-protocol.txt section 2: "only trusted proxies are allowed
    // to use this protocol"). Nor is a client without one let through: the receiver
    // "MUST not try to guess whether the protocol header is present or not" (ibid.).
    if (!trusted(input.peer))
        return InspectVerdict::reject(CloseReason::ProxyUntrusted,
                                      "the source is not in trusted_sources");
    proxy::ParseResult parsed = proxy::parse(input.bytes, kInspectBufferCap);
    switch (parsed.status) {
    case proxy::Status::NeedMore:
        return InspectVerdict::need_more();
    case proxy::Status::Malformed:
        return InspectVerdict::reject(CloseReason::ProxyInvalid, std::string(parsed.error));
    case proxy::Status::Oversized:
        return InspectVerdict::reject(CloseReason::InspectOversized, std::string(parsed.error));
    case proxy::Status::Done:
        break;
    }
    InspectVerdict verdict = InspectVerdict::done(parsed.consumed);
    if (!parsed.header.unknown) {
        verdict.client = parsed.header.source;
        verdict.local = parsed.header.destination;
    }
    for (const proxy::Tlv& tlv : parsed.header.tlvs)
        if (std::find(pass_tlvs_.begin(), pass_tlvs_.end(), tlv.type) != pass_tlvs_.end())
            proxy::append_tlv(verdict.tlvs, tlv.type, tlv.value);
    return verdict;
}

} // namespace uringfwd::engine
