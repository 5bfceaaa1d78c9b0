#include "uring/provided_buffers.hpp"

#include "uring/ring.hpp"
#include "uring/ring_state.hpp"

#include <fmt/format.h>
#include <liburing.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>

namespace uringfwd::uring {

namespace {
void* map_anonymous(std::size_t bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
}
} // namespace

ProvidedBuffers::ProvidedBuffers(Ring& ring, uint16_t group, unsigned count, std::size_t size)
    : ring_(ring), group_(group), count_(count), size_(size) {
    if (count == 0 || count > 32768 || (count & (count - 1)) != 0)
        throw RingError(fmt::format("provided buffers: count {} is not a power of two "
                                    "between 1 and 32768",
                                    count));
    // The ring of buffer descriptors must be page aligned (io_uring_register_buf_ring.3);
    // mmap gives that. The buffers themselves are touched only when first used.
    ring_bytes_ = sizeof(io_uring_buf) * count;
    ring_entries_ = static_cast<io_uring_buf_ring*>(map_anonymous(ring_bytes_));
    memory_ = static_cast<std::byte*>(map_anonymous(count * size));
    if (ring_entries_ == nullptr || memory_ == nullptr) {
        int err = errno;
        unmap();
        throw RingError(fmt::format("provided buffers: mmap: {}", std::strerror(err)));
    }
    io_uring_buf_reg reg{};
    reg.ring_addr = reinterpret_cast<uint64_t>(ring_entries_);
    reg.ring_entries = count;
    reg.bgid = group;
    int ret = io_uring_register_buf_ring(&ring.state().ring, &reg, 0);
    if (ret < 0) {
        unmap();
        throw RingError(fmt::format("cannot register a provided-buffer ring: {}{}",
                                    std::strerror(-ret),
                                    ret == -EINVAL ? " (needs Linux 5.19 or later)" : ""));
    }
    io_uring_buf_ring_init(ring_entries_);
    int mask = io_uring_buf_ring_mask(count);
    id_at_.resize(count);
    position_of_.resize(count);
    in_ring_.assign(count, true);
    for (unsigned id = 0; id < count; ++id) {
        io_uring_buf_ring_add(ring_entries_, data(static_cast<uint16_t>(id)),
                              static_cast<unsigned>(size), static_cast<unsigned short>(id), mask,
                              static_cast<int>(id));
        id_at_[id] = static_cast<uint16_t>(id);
        position_of_[id] = static_cast<uint16_t>(id);
    }
    io_uring_buf_ring_advance(ring_entries_, static_cast<int>(count));
    tail_ = count;
}

ProvidedBuffers::~ProvidedBuffers() {
    io_uring_unregister_buf_ring(&ring_.state().ring, group_);
    unmap();
}

void ProvidedBuffers::unmap() {
    if (memory_ != nullptr)
        ::munmap(memory_, count_ * size_);
    if (ring_entries_ != nullptr)
        ::munmap(ring_entries_, ring_bytes_);
    memory_ = nullptr;
    ring_entries_ = nullptr;
}

std::byte* ProvidedBuffers::take(uint16_t id) {
    ++out_;
    in_ring_[id] = false;
    return data(id);
}

std::size_t ProvidedBuffers::take_bundle(uint16_t first, std::size_t bytes,
                                         std::span<uint16_t> out) {
    std::size_t n = (bytes + size_ - 1) / size_;
    if (first >= count_ || n == 0 || n > out.size() || n > count_)
        return 0;
    unsigned mask = count_ - 1;
    unsigned start = position_of_[first];
    for (std::size_t i = 0; i < n; ++i) {
        unsigned position = (start + i) & mask;
        uint16_t id = id_at_[position];
        if (!in_ring_[id] || position_of_[id] != position)
            return 0;
        out[i] = id;
    }
    for (std::size_t i = 0; i < n; ++i)
        take(out[i]);
    return n;
}

void ProvidedBuffers::give_back(uint16_t id) {
    --out_;
    in_ring_[id] = true;
    unsigned position = tail_++ & (count_ - 1);
    id_at_[position] = id;
    position_of_[id] = static_cast<uint16_t>(position);
    io_uring_buf_ring_add(ring_entries_, data(id), static_cast<unsigned>(size_), id,
                          io_uring_buf_ring_mask(count_), 0);
    // Publishes the entry to the kernel (a release store of the tail).
    io_uring_buf_ring_advance(ring_entries_, 1);
}

} // namespace uringfwd::uring
