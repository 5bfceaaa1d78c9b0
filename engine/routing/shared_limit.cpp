#include "routing/shared_limit.hpp"

namespace uringfwd::engine {

SharedLimit::SharedLimit(std::size_t limit, std::size_t shards)
    : limit_(limit), words_(shards / 64 + 1),
      wanting_(std::make_unique<std::atomic<uint64_t>[]>(words_)) {
    for (std::size_t w = 0; w < words_; ++w)
        wanting_[w].store(0, std::memory_order_relaxed);
}

bool SharedLimit::full() const {
    std::size_t limit = this->limit();
    return limit != 0 && used() >= limit;
}

SharedLimit::Taken SharedLimit::try_take() {
    std::size_t limit = this->limit();
    if (limit == 0)
        return Taken::Free;
    std::size_t now = used_.load(std::memory_order_seq_cst);
    while (now < limit)
        if (used_.compare_exchange_weak(now, now + 1, std::memory_order_seq_cst))
            return Taken::Counted;
    return Taken::No;
}

void SharedLimit::give_back() {
    used_.fetch_sub(1, std::memory_order_seq_cst);
}

void SharedLimit::want(std::size_t shard) {
    if (shard / 64 < words_)
        wanting_[shard / 64].fetch_or(uint64_t{1} << (shard % 64), std::memory_order_seq_cst);
}

void SharedLimit::unwant(std::size_t shard) {
    if (shard / 64 < words_)
        wanting_[shard / 64].fetch_and(~(uint64_t{1} << (shard % 64)), std::memory_order_seq_cst);
}

bool SharedLimit::anyone_wants() const {
    for (std::size_t w = 0; w < words_; ++w)
        if (wanting_[w].load(std::memory_order_seq_cst) != 0)
            return true;
    return false;
}

} // namespace uringfwd::engine
