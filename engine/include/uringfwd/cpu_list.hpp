// The Linux "cpulist" text format used throughout sysfs and by taskset -c: comma-separated
// CPU numbers and inclusive ranges, e.g. "0-7,16-23".
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace uringfwd {

// Highest CPU number accepted. Matches the kernel's largest NR_CPUS configuration, so any
// larger number is a typo rather than a real CPU.
inline constexpr int kMaxCpu = 4095;

// Parses "0-3,8,10-11" into {0,1,2,3,8,10,11}: sorted, without duplicates. Whitespace
// around numbers and separators (including sysfs's trailing newline) is ignored; an empty
// or all-blank string is the empty set. Throws std::invalid_argument naming the bad text
// on a reversed range, an empty item, a number above kMaxCpu, or anything else.
std::vector<int> parse_cpu_list(std::string_view text);

// The shortest cpulist for the given CPUs, using ranges for runs of two or more
// ("0-3,8,10-11"). Accepts unsorted input with duplicates; parse_cpu_list(format_cpu_list(v))
// is v sorted and deduplicated. Throws std::invalid_argument for numbers outside 0..kMaxCpu.
std::string format_cpu_list(const std::vector<int>& cpus);

} // namespace uringfwd
