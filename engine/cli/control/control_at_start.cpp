#include "cli/control/control_at_start.hpp"

#include "uringfwd/accounts.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace uringfwd::cli::control {

std::optional<ControlSocket> open_control_socket(const OperationsConfig& operations,
                                                 std::optional<UpgradeTakeover>& takeover) {
    if (operations.control.empty())
        return std::nullopt;
    if (takeover) {
        ops::UniqueFd fd = takeover->take_control_socket(operations.control);
        if (fd)
            return ControlSocket::adopt(std::move(fd), operations.control);
    }
    std::optional<gid_t> group;
    if (!operations.control_group.empty()) {
        try {
            group = lookup_group(operations.control_group);
        } catch (const std::exception& e) {
            throw std::runtime_error(fmt::format("control_group: {}", e.what()));
        }
    }
    return ControlSocket::bind(operations.control, operations.control_mode, group);
}

} // namespace uringfwd::cli::control
