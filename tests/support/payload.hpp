// Deterministic, seekable pseudo-random payloads: both ends of a transfer can produce
// (and hash) the same bytes independently, and a reordering or a dropped chunk shows up
// as a hash or content mismatch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace uringfwd::test {

class Payload {
public:
    explicit Payload(uint64_t seed) : seed_(seed) {}

    // Writes the bytes at [offset, offset + out.size()) of this payload's stream.
    void fill(uint64_t offset, std::span<std::byte> out) const;
    std::vector<std::byte> bytes(uint64_t offset, std::size_t size) const;

    uint64_t seed() const { return seed_; }

private:
    uint64_t word(uint64_t index) const;
    uint64_t seed_;
};

// SHA-256 of the first `size` bytes of Payload(seed); cached, as tests compare the same
// large payloads more than once.
std::string payload_sha256(uint64_t seed, uint64_t size);

} // namespace uringfwd::test
