// Smooth weighted round-robin, as nginx does it (ngx_http_upstream_get_peer() in
// src/http/ngx_http_upstream_round_robin.c): at every pick each eligible member's
// `current` grows by its weight, the member with the largest `current` is picked, and
// the total weight of the eligible members is taken off its `current`. Over any window
// each member gets its share of the picks, spread out rather than in runs: weights
// 5, 1, 1 give a a b a c a a. Unlike nginx there is no "effective weight" lowered on
// failures: passive health takes a failing member out altogether (PoolState).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace uringfwd::engine {

class SmoothWrr {
public:
    explicit SmoothWrr(std::size_t members = 0) : current_(members, 0) {}

    std::size_t size() const { return current_.size(); }

    // One pick among the members i < size() for which eligible(i) holds, weighted by
    // weight(i) (at least 1). Members not eligible keep their `current` untouched, as in
    // nginx, so a member that comes back resumes its place. Ties go to the lowest index.
    // nullopt when no member is eligible. Allocates nothing.
    template <typename Weight, typename Eligible>
    std::optional<std::size_t> pick(Weight&& weight, Eligible&& eligible) {
        std::optional<std::size_t> best;
        int64_t total = 0;
        for (std::size_t i = 0; i < current_.size(); ++i) {
            if (!eligible(i))
                continue;
            const auto w = static_cast<int64_t>(weight(i));
            current_[i] += w;
            total += w;
            if (!best || current_[i] > current_[*best])
                best = i;
        }
        if (best)
            current_[*best] -= total;
        return best;
    }

private:
    std::vector<int64_t> current_;
};

} // namespace uringfwd::engine
