// A limit the shards enforce together: a route's or a member's max_connections, or the
// connections the fd limit leaves room for. A configured limit is one number for the
// whole engine (as HAProxy's maxconn is for the process), but shards share nothing on
// the data path: this is touched on the admission path only, one atomic add when a
// connection is let in and one when it goes.
//
// A shard that finds no room registers itself (want()) and its clients wait; a shard
// that gives room back wakes the shards that want it (ShardDoorbells), so a client
// waiting on one shard gets in when a connection of another shard closes. Sequentially
// consistent on both sides, so no wake-up is lost: a shard sets its bit and then tries
// again; a giver gives back and then reads the bits. One of the two sees the other.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace uringfwd::engine {

class SharedLimit {
public:
    // `limit` 0: none. `shards`: how many shards may want room (their indexes below it).
    SharedLimit(std::size_t limit, std::size_t shards);

    std::size_t limit() const { return limit_.load(std::memory_order_relaxed); }
    // A reload's new value; the connections counted so far stay counted.
    void set_limit(std::size_t limit) { limit_.store(limit, std::memory_order_relaxed); }
    std::size_t used() const { return used_.load(std::memory_order_seq_cst); }
    bool full() const;

    // What try_take() did.
    enum class Taken : uint8_t {
        No,      // no room: nothing taken
        Counted, // one unit taken; give it back with give_back()
        Free,    // no limit: nothing counted, nothing to give back
    };
    // One unit if the limit leaves room.
    Taken try_take();
    // One unit whatever the limit (a connection that must be counted where it is: one
    // moved to another route by its ClientHello, a client already accepted).
    void take() { used_.fetch_add(1, std::memory_order_seq_cst); }
    void give_back();

    // Shard `shard` waits for room, until unwant().
    void want(std::size_t shard);
    void unwant(std::size_t shard);
    // Calls wake(s) for every shard other than `self` that wants room, after a
    // give_back() of `self`'s.
    template <typename F> void for_each_wanting(std::size_t self, F&& wake) const {
        for (std::size_t w = 0; w < words_; ++w) {
            uint64_t bits = wanting_[w].load(std::memory_order_seq_cst);
            while (bits != 0) {
                std::size_t s = w * 64 + static_cast<std::size_t>(__builtin_ctzll(bits));
                bits &= bits - 1;
                if (s != self)
                    wake(s);
            }
        }
    }
    bool anyone_wants() const;

private:
    std::atomic<std::size_t> limit_;
    std::atomic<std::size_t> used_{0};
    std::size_t words_;
    std::unique_ptr<std::atomic<uint64_t>[]> wanting_; // a bit per shard
};

} // namespace uringfwd::engine
