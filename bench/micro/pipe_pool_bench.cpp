// Cost of leasing a pipe from a shard's pool and giving it back, the step every
// direction takes when its source becomes readable and again when it goes idle.
#include "pipes/pipe_pool.hpp"

#include <benchmark/benchmark.h>

#include <optional>
#include <vector>

namespace {

using uringfwd::pipes::Pipe;
using uringfwd::pipes::PipePool;

// The steady state: an idle pipe is always there, so lease/give_back is pure
// bookkeeping (no pipe2, no fcntl).
void BM_PipePool_LeaseReturn(benchmark::State& state) {
    PipePool pool(128, 64 * 1024);
    if (auto warm = pool.lease())
        pool.give_back(std::move(*warm));
    for (auto _ : state) {
        std::optional<Pipe> pipe = pool.lease();
        benchmark::DoNotOptimize(pipe);
        pool.give_back(std::move(*pipe));
    }
}
BENCHMARK(BM_PipePool_LeaseReturn);

// The same with the kernel asked whether the pipe is empty (FIONREAD), the check used
// for pipes of aborted streams: shows what that one syscall adds.
void BM_PipePool_LeaseReturnAskKernel(benchmark::State& state) {
    PipePool pool(128, 64 * 1024);
    if (auto warm = pool.lease())
        pool.give_back(std::move(*warm));
    for (auto _ : state) {
        std::optional<Pipe> pipe = pool.lease();
        benchmark::DoNotOptimize(pipe);
        pool.give_back(std::move(*pipe), PipePool::Check::AskKernel);
    }
}
BENCHMARK(BM_PipePool_LeaseReturnAskKernel);

// Many directions busy at once: range(0) pipes leased, then all returned, so the idle
// list is exercised at depth. Reported per pipe.
void BM_PipePool_LeaseReturnBatch(benchmark::State& state) {
    const auto batch = static_cast<std::size_t>(state.range(0));
    PipePool pool(batch, 64 * 1024);
    std::vector<Pipe> leased;
    leased.reserve(batch);
    for (std::size_t i = 0; i < batch; ++i)
        leased.push_back(std::move(*pool.lease()));
    for (Pipe& p : leased)
        pool.give_back(std::move(p));
    leased.clear();
    for (auto _ : state) {
        for (std::size_t i = 0; i < batch; ++i)
            leased.push_back(std::move(*pool.lease()));
        for (Pipe& p : leased)
            pool.give_back(std::move(p));
        leased.clear();
    }
    state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(batch));
}
BENCHMARK(BM_PipePool_LeaseReturnBatch)->Arg(16)->Arg(128);

// A cold lease: pipe2() plus F_SETPIPE_SZ, then close. What a shard pays for each pipe
// until its pool is warm, and for every pipe closed dirty.
void BM_PipePool_CreateAndClose(benchmark::State& state) {
    for (auto _ : state) {
        PipePool pool(1, 64 * 1024);
        std::optional<Pipe> pipe = pool.lease();
        benchmark::DoNotOptimize(pipe);
    }
}
BENCHMARK(BM_PipePool_CreateAndClose);

} // namespace
