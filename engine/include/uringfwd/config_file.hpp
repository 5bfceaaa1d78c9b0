// The configuration file: routes, pools and engine settings in TOML (examples/uring-fwd.toml
// documents every key). The parser reports every problem it finds, each as one line
// "FILE:LINE: message", so a user fixes a file in one pass rather than one error per run.
#pragma once

#include "uringfwd/config.hpp"
#include "uringfwd/numa_topology.hpp"
#include "uringfwd/operations.hpp"

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace uringfwd {

// Exactly one of the two is set: a config when the file is valid, errors otherwise.
struct ConfigFileResult {
    std::optional<EngineConfig> config;
    // "FILE:LINE: message", one line each (no newline inside), ordered by line.
    std::vector<std::string> errors;
    // [engine] metrics, access_log and access_log_format (valid when `config` is set).
    OperationsConfig operations;
};

// [engine] numa_nodes is turned into CPUs while parsing (EngineConfig holds CPUs only), so
// parsing needs the machine's topology. Empty: read_numa_topology(), called only when the
// file names numa_nodes. Tests pass a fixed topology.
using TopologyReader = std::function<NumaTopology()>;

// Whether parsing also looks up what the file names, as Engine::start() will: the host
// names of listen and upstream addresses (getaddrinfo) and the users and groups of Unix
// listeners (NSS). Each that does not resolve is an error at its line. Both may block
// (a DNS server): the binary's --check, start and SIGHUP ask for it.
enum class NameLookup { Skip, Resolve };

// Parses `text`; `source_name` is the FILE of each error line.
ConfigFileResult parse_config(std::string_view text, std::string_view source_name,
                              const TopologyReader& read_topology = {},
                              NameLookup names = NameLookup::Skip);

// Reads and parses the file at `path` (named as given in error lines). A file that cannot
// be read is one error line, "PATH: cannot read: <reason>".
ConfigFileResult load_config_file(const std::string& path, const TopologyReader& read_topology = {},
                                  NameLookup names = NameLookup::Skip);

// "250ms", "2s", "5m", "1h" or "0": a whole number and a unit, as everywhere in the file.
// nullopt otherwise, with the reason (without the text itself) in `why` when given.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text,
                                                        std::string* why = nullptr);
// The same with "us" accepted as well (the file's busy_poll and bulk_coalesce: their
// useful values lie below a millisecond).
std::optional<std::chrono::microseconds> parse_duration_us(std::string_view text,
                                                           std::string* why = nullptr);
// The shortest text parse_duration_us() reads back as `d`: "1h", "90s", "250ms", "50us".
std::string format_duration(std::chrono::microseconds d);

} // namespace uringfwd
