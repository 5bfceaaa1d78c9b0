#include "platform/shard_plan.hpp"

#include "support/plural.hpp"
#include "uringfwd/cpu_list.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace uringfwd::engine {

std::vector<int> choose_shard_cpus(const std::vector<int>& allowed,
                                   const std::vector<int>& requested, std::size_t shards) {
    if (allowed.empty())
        throw std::invalid_argument("this process may run on no CPU");
    std::vector<int> chosen;
    if (requested.empty()) {
        chosen = allowed;
    } else {
        for (int cpu : requested) {
            if (std::find(allowed.begin(), allowed.end(), cpu) == allowed.end())
                throw std::invalid_argument(
                    fmt::format("CPU {} is not available to this process (it may run on {})", cpu,
                                format_cpu_list(allowed)));
            if (std::find(chosen.begin(), chosen.end(), cpu) == chosen.end())
                chosen.push_back(cpu);
        }
    }
    if (shards > chosen.size())
        throw std::invalid_argument(fmt::format(
            "{} asked for but only {} to pin them to ({}): one shard per CPU",
            count_of(shards, "shard"), count_of(chosen.size(), "CPU"), format_cpu_list(chosen)));
    if (shards > 0)
        chosen.resize(shards);
    return chosen;
}

std::optional<int> consecutive_base(const std::vector<int>& cpus) {
    if (cpus.empty())
        return std::nullopt;
    for (std::size_t i = 1; i < cpus.size(); ++i)
        if (cpus[i] != cpus[0] + static_cast<int>(i))
            return std::nullopt;
    return cpus[0];
}

} // namespace uringfwd::engine
