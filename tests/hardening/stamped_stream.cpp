#include "tests/hardening/stamped_stream.hpp"

#include <cstring>
#include <fmt/core.h>

namespace uringfwd::test {
namespace {

uint64_t word(uint32_t id, uint64_t index) {
    return (static_cast<uint64_t>(id) << 32) | (index & 0xffffffffu);
}

} // namespace

void fill_stamped(uint32_t id, uint64_t offset, std::span<std::byte> out) {
    uint64_t index = offset / 8;
    for (std::size_t pos = 0; pos < out.size(); pos += 8, ++index) {
        const uint64_t w = word(id, index);
        std::memcpy(out.data() + pos, &w, std::min<std::size_t>(8, out.size() - pos));
    }
}

bool StampedVerifier::feed(std::span<const std::byte> data) {
    if (!ok()) {
        return false;
    }
    for (const std::byte b : data) {
        partial_[partial_size_++] = static_cast<unsigned char>(b);
        if (partial_size_ < 8) {
            continue;
        }
        partial_size_ = 0;
        uint64_t got = 0;
        std::memcpy(&got, partial_, 8);
        const uint64_t index = received_ / 8;
        const uint64_t want = word(id_, index);
        received_ += 8;
        if (got != want) {
            error_ = fmt::format("connection {} word {} (byte {}): got {:#018x} (connection {}, "
                                 "word {}), want {:#018x}",
                                 id_, index, index * 8, got, got >> 32, got & 0xffffffffu, want);
            return false;
        }
    }
    return true;
}

} // namespace uringfwd::test
