// Helpers the two hand-over benchmarks (wake_bench, handover_bench) share: clock,
// pinning, failing, and the summaries they print.
#pragma once

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

namespace handover_bench_util {

inline uint64_t now_ns(clockid_t clock = CLOCK_MONOTONIC) {
    timespec ts{};
    clock_gettime(clock, &ts);
    return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}

// Pins the calling thread. The benchmarks place the waker and the waiter on different
// CPUs on purpose; a silent failure would measure something else, so it is fatal.
inline void pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (int r = pthread_setaffinity_np(pthread_self(), sizeof(set), &set); r != 0) {
        std::fprintf(stderr, "pin to CPU %d: %s\n", cpu, std::strerror(r));
        std::exit(1);
    }
}

// `error` is an errno value; by default the current errno.
[[noreturn]] inline void die(const char* what, int error = errno) {
    std::fprintf(stderr, "%s: %s\n", what, std::strerror(error));
    std::exit(1);
}

// The value at fraction p (0.5: the median) of the sorted samples, in their unit.
inline double percentile(std::vector<uint64_t> values, double p) {
    std::sort(values.begin(), values.end());
    return values.empty() ? 0 : double(values[std::size_t(p * double(values.size() - 1))]);
}

inline double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values.empty() ? 0 : values[values.size() / 2];
}

} // namespace handover_bench_util
