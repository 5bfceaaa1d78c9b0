// libFuzzer target for the TLS ClientHello reader (engine/protocol/client_hello.hpp).
// Checks, besides memory safety (ASan, UBSan):
//  - feeding the input in two pieces gives the same answer as feeding it whole (the
//    reader is incremental and must not depend on how TCP cut the bytes);
//  - every view of a Done result lies inside the input or the scratch buffer;
//  - the answer is NotTls exactly when the first byte is not 22 (a handshake record).
#include "protocol/client_hello.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

namespace {

using uringfwd::engine::tls::ClientHelloReader;
using uringfwd::engine::tls::HelloResult;
using uringfwd::engine::tls::HelloStatus;

void fail(const char* what) {
    std::fprintf(stderr, "client_hello_fuzz: %s\n", what);
    std::abort();
}

bool inside(std::string_view view, std::span<const std::byte> a, std::span<const std::byte> b) {
    auto in = [&](std::span<const std::byte> s) {
        const auto* begin = reinterpret_cast<const char*>(s.data());
        return view.data() >= begin && view.data() + view.size() <= begin + s.size();
    };
    return view.empty() || in(a) || in(b);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
    std::vector<std::byte> scratch(uringfwd::engine::tls::kMaxClientHelloBytes);

    ClientHelloReader whole;
    HelloResult all = whole.update(bytes, scratch);
    if (size > 0 && (all.status == HelloStatus::NotTls) != (data[0] != 22))
        fail("NotTls must be decided by the first byte alone");
    if (all.status == HelloStatus::Done) {
        if (!inside(all.info.server_name, bytes, scratch))
            fail("server_name points outside the input");
        if (all.info.alpn_count > uringfwd::engine::tls::kMaxAlpn)
            fail("alpn_count past the array");
        for (std::size_t i = 0; i < all.info.alpn_count; ++i)
            if (all.info.alpn[i].empty() || !inside(all.info.alpn[i], bytes, scratch))
                fail("an ALPN protocol points outside the input or is empty");
        if (all.info.length == 0 || all.info.length > size)
            fail("length outside the input");
    }

    // The same bytes in two arrivals, cut where the first byte says.
    std::size_t cut = size == 0 ? 0 : data[size - 1] % (size + 1);
    ClientHelloReader split;
    std::vector<std::byte> scratch2(uringfwd::engine::tls::kMaxClientHelloBytes);
    HelloResult first = split.update(bytes.first(cut), scratch2);
    HelloResult second =
        first.status == HelloStatus::NeedMore ? split.update(bytes, scratch2) : first;
    if (second.status != all.status || second.error != all.error)
        fail("the answer depends on how the bytes arrived");
    if (all.status == HelloStatus::Done && second.info.server_name != all.info.server_name)
        fail("server_name depends on how the bytes arrived");
    return 0;
}
