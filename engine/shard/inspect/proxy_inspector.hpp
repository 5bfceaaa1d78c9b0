// accept_proxy: the inspector that reads a PROXY v1/v2 header (protocol/proxy_header.hpp)
// from a route's clients, first in the chain (inspect.hpp).
#pragma once

#include "net/cidr.hpp"
#include "shard/inspect/inspect.hpp"

#include <vector>

namespace uringfwd::engine {

class ProxyInspector final : public Inspector {
public:
    // `trusted`: who may send a header (empty: anyone). `pass_tlvs`: v2 TLV types kept
    // for a v2 header sent upstream.
    ProxyInspector(std::vector<Cidr> trusted, std::vector<uint8_t> pass_tlvs)
        : trusted_(std::move(trusted)), pass_tlvs_(std::move(pass_tlvs)) {}

    std::string_view name() const override { return "PROXY header"; }
    InspectVerdict inspect(const InspectInput& input) const override;

private:
    bool trusted(const SocketAddress& peer) const;

    std::vector<Cidr> trusted_;
    std::vector<uint8_t> pass_tlvs_;
};

} // namespace uringfwd::engine
