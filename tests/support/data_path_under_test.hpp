// The data path the integration suites run the engine with. meson runs the same
// integration binary once per path (URING_FWD_TEST_DATA_PATH=splice|copy|auto), so
// every behaviour is checked on both data paths and on the switch between them;
// unset means the engine's default.
#pragma once

#include "uringfwd/config.hpp"

#include <optional>
#include <string>
#include <vector>

namespace uringfwd::test {

// Throws std::invalid_argument for a value that is not a data path.
std::optional<DataPath> data_path_under_test();

// The direct-descriptor mode the suites run the engine with
// (URING_FWD_TEST_DIRECT=auto|on|off; unset: the engine's default). meson runs the
// integration suite once more with `off`, so every behaviour is checked on plain fds
// as well as on the direct descriptors this kernel gives by default. Throws
// std::invalid_argument for another value.
std::optional<DirectDescriptors> direct_descriptors_under_test();

// The splice mechanism the suites run the engine with (URING_FWD_TEST_SPLICE=
// auto|ring|inline; unset: the engine's default, inline where it can be had). meson runs
// the integration suite once more on the splice path with `ring`, so the ring's pairs
// stay checked now that they are not the default. Throws std::invalid_argument for
// another value.
std::optional<SpliceMechanism> splice_mechanism_under_test();

// args for a uring-fwd command line (the binary's own, or a wrapper's that runs it,
// given as `program`), with --data-path added when a path is under test and the
// command line does not choose one itself; --direct-descriptors and
// --splice-mechanism the same way.
std::vector<std::string> with_data_path_under_test(const std::string& program,
                                                   std::vector<std::string> args);

} // namespace uringfwd::test
