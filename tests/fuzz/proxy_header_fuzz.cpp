// libFuzzer target for the PROXY protocol parser (engine/protocol/proxy_header.hpp).
// Whatever the bytes, parse() must stay in bounds and be consistent: a header it
// accepts is accepted again from exactly its own bytes, every shorter prefix of it
// asks for more, and a header written from what it found parses back to the same
// addresses.
#include "protocol/proxy_header.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

using namespace uringfwd::engine;

void check(bool ok, const char* what) {
    if (!ok) {
        std::fprintf(stderr, "invariant broken: %s\n", what);
        std::abort();
    }
}

bool same(const SocketAddress& a, const SocketAddress& b) {
    return a.length == b.length && std::memcmp(&a.storage, &b.storage, a.length) == 0;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::span<const std::byte> input(reinterpret_cast<const std::byte*>(data), size);
    // The first byte, when there is one, also varies the caller's cap.
    std::size_t cap = size > 0 ? 16 + static_cast<std::size_t>(data[0]) * 64 : 16 * 1024;
    proxy::ParseResult r = proxy::parse(input, cap);
    if (r.status != proxy::Status::Done) {
        check(r.consumed == 0, "consumed without a header");
        check(r.status == proxy::Status::NeedMore || !r.error.empty(), "a failure without why");
        return 0;
    }
    check(r.consumed > 0 && r.consumed <= size, "consumed out of range");
    for (const proxy::Tlv& tlv : r.header.tlvs)
        check(tlv.value.data() >= input.data() &&
                  tlv.value.data() + tlv.value.size() <= input.data() + r.consumed,
              "a TLV outside the header");
    proxy::ParseResult again = proxy::parse(input.first(r.consumed), cap);
    check(again.status == proxy::Status::Done && again.consumed == r.consumed,
          "the header alone does not parse the same");
    for (std::size_t n : {std::size_t{0}, r.consumed / 2, r.consumed - 1})
        check(proxy::parse(input.first(n), cap).status == proxy::Status::NeedMore,
              "a prefix of a valid header is not need-more");
    if (r.header.unknown)
        return 0;
    for (proxy::Version v : {proxy::Version::V1, proxy::Version::V2}) {
        std::vector<std::byte> out;
        if (v == proxy::Version::V1)
            proxy::write_v1(out, &r.header.source, &r.header.destination);
        else
            proxy::write_v2(out, &r.header.source, &r.header.destination);
        proxy::ParseResult back = proxy::parse(out);
        check(back.status == proxy::Status::Done && back.consumed == out.size(),
              "a written header does not parse");
        check(!back.header.unknown && same(back.header.source, r.header.source) &&
                  same(back.header.destination, r.header.destination),
              "a written header does not carry the same addresses");
    }
    return 0;
}
