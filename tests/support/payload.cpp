#include "tests/support/payload.hpp"

#include "tests/support/sha256.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

namespace uringfwd::test {

// splitmix64 of (seed, index): each 8-byte word is computable on its own, which makes
// the stream seekable and cheap to generate at memory speed.
uint64_t Payload::word(uint64_t index) const {
    uint64_t z = seed_ * 0x9e3779b97f4a7c15ULL + index * 0xbf58476d1ce4e5b9ULL + 1;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void Payload::fill(uint64_t offset, std::span<std::byte> out) const {
    std::size_t done = 0;
    while (done < out.size()) {
        const uint64_t pos = offset + done;
        const uint64_t w = word(pos / 8);
        const std::size_t skip = static_cast<std::size_t>(pos % 8);
        const std::size_t take = std::min<std::size_t>(8 - skip, out.size() - done);
        std::memcpy(out.data() + done, reinterpret_cast<const std::byte*>(&w) + skip, take);
        done += take;
    }
}

std::vector<std::byte> Payload::bytes(uint64_t offset, std::size_t size) const {
    std::vector<std::byte> out(size);
    fill(offset, out);
    return out;
}

std::string payload_sha256(uint64_t seed, uint64_t size) {
    static std::mutex mu;
    static std::map<std::pair<uint64_t, uint64_t>, std::string> cache;
    {
        std::lock_guard lock(mu);
        if (auto it = cache.find({seed, size}); it != cache.end()) {
            return it->second;
        }
    }
    const Payload payload{seed};
    Sha256 sha;
    std::vector<std::byte> buf(1 << 20);
    for (uint64_t off = 0; off < size;) {
        const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(buf.size(), size - off));
        payload.fill(off, std::span(buf.data(), n));
        sha.update(std::span(buf.data(), n));
        off += n;
    }
    std::string digest = sha.hex_digest();
    std::lock_guard lock(mu);
    cache.emplace(std::pair{seed, size}, digest);
    return digest;
}

} // namespace uringfwd::test
