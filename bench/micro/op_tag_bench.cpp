// Cost of packing and unpacking the 64-bit user_data every operation carries: done
// once per submission and once per completion.
#include "shard/loop/op_tag.hpp"

#include <benchmark/benchmark.h>

#include <cstdint>

namespace {

using uringfwd::engine::Op;
using uringfwd::engine::OpTag;
using uringfwd::engine::Owner;
using uringfwd::engine::Side;

void BM_OpTag_Encode(benchmark::State& state) {
    uint32_t slot = 0;
    for (auto _ : state) {
        // Inputs change every round so the compiler cannot fold the encoding away.
        OpTag tag = OpTag::for_connection(Op::SpliceIn, slot, slot * 3u,
                                          (slot & 1u) != 0 ? Side::ToClient : Side::ToUpstream);
        uint64_t v = tag.encode();
        benchmark::DoNotOptimize(v);
        ++slot;
    }
}
BENCHMARK(BM_OpTag_Encode);

void BM_OpTag_Decode(benchmark::State& state) {
    uint64_t v = OpTag::for_connection(Op::SpliceOut, 678, 12345, Side::ToClient).encode();
    for (auto _ : state) {
        benchmark::DoNotOptimize(v);
        OpTag tag = OpTag::decode(v);
        benchmark::DoNotOptimize(tag);
    }
}
BENCHMARK(BM_OpTag_Decode);

// What dispatch does: decode, then branch on the owner kind.
void BM_OpTag_RoundTrip(benchmark::State& state) {
    uint32_t slot = 0;
    uint64_t shard_ops = 0;
    for (auto _ : state) {
        const bool listener = (slot & 15u) == 0;
        OpTag in = listener ? OpTag::for_listener(Op::Accept, slot & 7u)
                            : OpTag::for_connection(Op::PollIn, slot, slot);
        uint64_t v = in.encode();
        benchmark::DoNotOptimize(v);
        OpTag out = OpTag::decode(v);
        shard_ops += out.owner == Owner::Listener ? 1 : 0;
        ++slot;
    }
    benchmark::DoNotOptimize(shard_ops);
}
BENCHMARK(BM_OpTag_RoundTrip);

} // namespace
