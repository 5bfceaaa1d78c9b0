// The members one connection has already tried to connect to, so that a retry goes to
// another member. A connection makes at most `retries` + 1 attempts, so a few inline
// entries do: no allocation per connection.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace uringfwd::engine {

class TriedSet {
public:
    // Beyond this many attempts the oldest entry is forgotten: a member tried that long
    // ago may be tried again, which is better than refusing the retry.
    static constexpr std::size_t kCapacity = 8;

    void add(std::size_t member) {
        members_[next_] = static_cast<uint32_t>(member);
        next_ = static_cast<uint8_t>((next_ + 1) % kCapacity);
        if (count_ < kCapacity)
            ++count_;
    }

    bool contains(std::size_t member) const {
        for (std::size_t i = 0; i < count_; ++i)
            if (members_[i] == member)
                return true;
        return false;
    }

    std::size_t size() const { return count_; }
    bool empty() const { return count_ == 0; }
    void clear() { count_ = next_ = 0; }

private:
    std::array<uint32_t, kCapacity> members_{};
    uint8_t count_ = 0;
    uint8_t next_ = 0; // where the next entry goes (the oldest once full)
};

} // namespace uringfwd::engine
