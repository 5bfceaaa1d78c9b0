#include "uringfwd/route.hpp"

namespace uringfwd {

std::string_view to_string(BalancePolicy policy) {
    switch (policy) {
    case BalancePolicy::RoundRobin:
        return "round-robin";
    case BalancePolicy::LeastActive:
        return "least-active";
    case BalancePolicy::Maglev:
        return "maglev";
    }
    return "?";
}

std::optional<BalancePolicy> parse_balance_policy(std::string_view text) {
    for (BalancePolicy p :
         {BalancePolicy::RoundRobin, BalancePolicy::LeastActive, BalancePolicy::Maglev})
        if (text == to_string(p))
            return p;
    return std::nullopt;
}

} // namespace uringfwd
