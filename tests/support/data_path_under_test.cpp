#include "tests/support/data_path_under_test.hpp"

#include "tests/support/binary_process.hpp"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

namespace uringfwd::test {

std::optional<DataPath> data_path_under_test() {
    const char* text = std::getenv("URING_FWD_TEST_DATA_PATH");
    if (text == nullptr || *text == '\0')
        return std::nullopt;
    std::optional<DataPath> path = parse_data_path(text);
    if (!path)
        throw std::invalid_argument(std::string("URING_FWD_TEST_DATA_PATH: not a data path: ") +
                                    text);
    return path;
}

std::optional<DirectDescriptors> direct_descriptors_under_test() {
    const char* text = std::getenv("URING_FWD_TEST_DIRECT");
    if (text == nullptr || *text == '\0')
        return std::nullopt;
    std::optional<DirectDescriptors> mode = parse_direct_descriptors(text);
    if (!mode)
        throw std::invalid_argument(std::string("URING_FWD_TEST_DIRECT: not auto, on or off: ") +
                                    text);
    return mode;
}

std::optional<SpliceMechanism> splice_mechanism_under_test() {
    const char* text = std::getenv("URING_FWD_TEST_SPLICE");
    if (text == nullptr || *text == '\0')
        return std::nullopt;
    std::optional<SpliceMechanism> mechanism = parse_splice_mechanism(text);
    if (!mechanism)
        throw std::invalid_argument(
            std::string("URING_FWD_TEST_SPLICE: not auto, ring or inline: ") + text);
    return mechanism;
}

std::vector<std::string> with_data_path_under_test(const std::string& program,
                                                   std::vector<std::string> args) {
    std::optional<DataPath> path = data_path_under_test();
    std::optional<DirectDescriptors> direct = direct_descriptors_under_test();
    std::optional<SpliceMechanism> mechanism = splice_mechanism_under_test();
    if (!path && !direct && !mechanism)
        return args;
    auto has = [&](const char* word) {
        return std::find(args.begin(), args.end(), word) != args.end();
    };
    bool runs_engine = program == uring_fwd_binary() || has(uring_fwd_binary().c_str());
    if (!runs_engine || has("--version") || has("--help"))
        return args;
    // Last on the line: for a wrapper, uring-fwd's own arguments come last. Built in
    // place (emplace_back): a pushed temporary string draws GCC 12's false
    // -Warray-bounds at -O3.
    if (path && !has("--data-path")) {
        args.emplace_back("--data-path");
        args.emplace_back(to_string(*path));
    }
    if (direct && !has("--direct-descriptors")) {
        args.emplace_back("--direct-descriptors");
        args.emplace_back(to_string(*direct));
    }
    // bulk_park cannot be had with inline splices: a command line that parks keeps the
    // engine's choice (auto: the ring).
    if (mechanism && !has("--splice-mechanism") && !has("--bulk-park")) {
        args.emplace_back("--splice-mechanism");
        args.emplace_back(to_string(*mechanism));
    }
    return args;
}

} // namespace uringfwd::test
