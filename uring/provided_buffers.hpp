// A provided-buffer ring (IORING_REGISTER_PBUF_RING, Linux 5.19): a group of equal
// buffers the kernel picks from when a receive completes, so a receive that waits for
// data holds no memory. The kernel takes buffers in ring order; give_back() puts one
// back at the tail. Nothing here knows what the bytes are for.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

struct io_uring_buf_ring; // liburing stays out of this header on purpose

namespace uringfwd::uring {

class Ring;

class ProvidedBuffers {
public:
    // count: a power of two, at most 32768. Registers the ring as buffer group `group`
    // on `ring`, which must outlive this object. Throws RingError (with the reason)
    // when the kernel refuses, e.g. before 5.19 (EINVAL) or without memory.
    ProvidedBuffers(Ring& ring, uint16_t group, unsigned count, std::size_t size);
    ~ProvidedBuffers();
    ProvidedBuffers(const ProvidedBuffers&) = delete;
    ProvidedBuffers& operator=(const ProvidedBuffers&) = delete;

    uint16_t group() const { return group_; }
    unsigned count() const { return count_; }
    std::size_t buffer_size() const { return size_; }
    // Buffers the kernel has handed out in completions and nobody gave back yet.
    unsigned out() const { return out_; }

    // The buffer a completion named; counts it as out.
    std::byte* take(uint16_t id);
    // A bundle receive (Ring::recv_bundle) of `bytes` > 0 whose completion named `first`:
    // the kernel filled consecutive ring entries from first's, each full but the last
    // (io_uring/net.c io_bundle_nbufs). Writes their ids, in order, to `out` and counts
    // them as out; returns how many, or 0 if that many entries beyond `first` were
    // not all in the ring or do not fit `out` (a broken invariant: nothing is taken).
    std::size_t take_bundle(uint16_t first, std::size_t bytes, std::span<uint16_t> out);
    std::byte* data(uint16_t id) const { return memory_ + static_cast<std::size_t>(id) * size_; }
    // Puts a buffer taken from a completion back at the tail of the ring.
    void give_back(uint16_t id);

private:
    void unmap();

    Ring& ring_;
    uint16_t group_;
    unsigned count_;
    std::size_t size_;
    unsigned out_ = 0;
    // What the kernel sees in ring order: the id at each ring position, the position
    // of each id, whether each id is in the ring (not handed out), and the position
    // the next give_back() writes (the ring's tail). A bundle spans consecutive
    // positions, and ids given back out of order are not consecutive.
    std::vector<uint16_t> id_at_;
    std::vector<uint16_t> position_of_;
    std::vector<bool> in_ring_;
    unsigned tail_ = 0;
    io_uring_buf_ring* ring_entries_ = nullptr; // shared with the kernel
    std::size_t ring_bytes_ = 0;
    std::byte* memory_ = nullptr; // count_ * size_ bytes
};

} // namespace uringfwd::uring
