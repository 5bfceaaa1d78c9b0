// A 64-bit hash of bytes that is the same on every machine, build and process, so that
// engines configured alike agree on which member serves a client (std::hash promises
// none of that). Not for anything an attacker must not be able to steer: it has no
// secret key.
#pragma once

#include <cstdint>
#include <string_view>

#include <sys/socket.h>

namespace uringfwd::engine {

// FNV-1a, 64-bit (Fowler, Noll, Vo; the offset basis and prime are the published
// parameters). Fast and byte-at-a-time, but its low bits mix poorly, and the callers
// reduce hashes modulo a table size: always follow it with mix64().
constexpr uint64_t kFnvOffsetBasis = 0xcbf29ce484222325ULL;
constexpr uint64_t kFnvPrime = 0x100000001b3ULL;

constexpr uint64_t fnv1a64(std::string_view bytes, uint64_t state = kFnvOffsetBasis) {
    for (char c : bytes) {
        state ^= static_cast<unsigned char>(c);
        state *= kFnvPrime;
    }
    return state;
}

// The 64-bit finalizer of MurmurHash3 (fmix64, Austin Appleby, public domain): a
// bijection in which every input bit flips each output bit with probability close to
// one half, so that `hash % M` depends on all of the input.
constexpr uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

// The stable hash of `bytes`. Different seeds give independent-looking hashes of the
// same bytes (Maglev needs two per member): the seed's 8 bytes, least significant
// first whatever the machine's byte order, are hashed before the bytes themselves.
constexpr uint64_t stable_hash(std::string_view bytes, uint64_t seed = 0) {
    uint64_t state = kFnvOffsetBasis;
    for (int i = 0; i < 8; ++i) {
        state ^= (seed >> (8 * i)) & 0xff;
        state *= kFnvPrime;
    }
    return mix64(fnv1a64(bytes, state));
}

// The hash of a client's IP address alone (not its port, which changes with every
// connection), so that one client keeps reaching the same member. IPv4: its 4 bytes;
// IPv6: its 16 bytes, except that an IPv4-mapped address (::ffff:a.b.c.d, how a
// dual-stack listener sees IPv4 clients) hashes as the IPv4 address. Unix and any other
// family: one constant, as such clients carry no address to tell them apart.
uint64_t hash_client_address(const sockaddr_storage& address);

} // namespace uringfwd::engine
