// Byte streams that name their owner in every 8-byte word: word i of connection `id` is
// (id << 32) | i. A byte that leaks from one connection into another, or moves within
// one, is caught at the word it lands in, with both connections named.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace uringfwd::test {

// Fills `out` with the stream's bytes starting at `offset` (a multiple of 8).
void fill_stamped(uint32_t id, uint64_t offset, std::span<std::byte> out);

// Checks a received stream chunk by chunk against connection `id`'s stream.
class StampedVerifier {
public:
    explicit StampedVerifier(uint32_t id) : id_(id) {}

    // False from the first wrong word on; error() then says what arrived instead.
    bool feed(std::span<const std::byte> data);
    bool ok() const { return error_.empty(); }
    const std::string& error() const { return error_; }
    uint64_t received() const { return received_; }

private:
    uint32_t id_;
    uint64_t received_ = 0;
    unsigned char partial_[8] = {};
    std::size_t partial_size_ = 0;
    std::string error_;
};

} // namespace uringfwd::test
