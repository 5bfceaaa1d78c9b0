// Reading the binary's /metrics in tests: one HTTP/1.0 GET over loopback, and the
// samples of the text format by their full name ("name{label="v",...}").
#pragma once

#include "tests/support/binary_process.hpp"
#include "tests/support/deadline.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace uringfwd::test {

// The body of GET /metrics on 127.0.0.1:`port`; throws on a failed request or a status
// other than 200.
std::string scrape_metrics(uint16_t port, const Deadline& deadline);

// The status of GET `path` on 127.0.0.1:`port` (200, 404, ...); throws on a failed
// request.
int http_status(uint16_t port, const std::string& path, const Deadline& deadline);

// Sample lines of the text exposition format, "name{labels}" (as written) -> value.
// Comment lines (# HELP, # TYPE) are skipped.
std::map<std::string, double> parse_samples(const std::string& text);

// The sum of every sample of family `name` (any labels; exactly the name, so
// "x_total" does not match "x_total_more") whose labels contain `label_filter`
// (e.g. "route=\"web\""; empty: all).
double sum_of(const std::map<std::string, double>& samples, const std::string& name,
              const std::string& label_filter = "");

// The port of "metrics at http://HOST:PORT/metrics" on the binary's stderr.
std::optional<uint16_t> metrics_port(const BinaryProcess& process, const Deadline& deadline);

} // namespace uringfwd::test
