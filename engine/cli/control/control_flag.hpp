// --control PATH: the binary's runtime control socket, over the file's [engine] control.
#pragma once

#include "uringfwd/operations.hpp"

#include <CLI/CLI.hpp>

#include <string>

namespace uringfwd::cli::control {

// Declares --control on `app`, writing into `path`.
void add_control_flag(CLI::App& app, std::string& path);

// After parsing: the path, when --control was given, over `operations.control`. A path
// against the rule (is_upgrade_socket_path()) ends the program with fail().
void apply_control_flag(const CLI::App& app, const std::string& path, OperationsConfig& operations);

} // namespace uringfwd::cli::control
