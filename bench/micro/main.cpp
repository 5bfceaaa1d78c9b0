// Entry point of micro_bench: the stock Google Benchmark main (flags such as
// --benchmark_filter and --benchmark_format=json work as usual).
#include <benchmark/benchmark.h>

BENCHMARK_MAIN();
