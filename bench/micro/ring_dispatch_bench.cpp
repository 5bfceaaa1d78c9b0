// Cost per completion of the ring's submit/reap cycle, with operations that complete
// at once so only io_uring's own overhead is measured. The Ring API has no NOP, so two
// stand-ins: a poll on an eventfd that is already readable (completes inline at
// submission) and a 0 ns timeout (goes through the kernel's timer path).
#include "shard/loop/op_tag.hpp"
#include "uring/ring.hpp"
#include "uring/unique_fd.hpp"

#include <benchmark/benchmark.h>
#include <poll.h>
#include <sys/eventfd.h>

#include <chrono>
#include <cstdint>

namespace {

using uringfwd::engine::Op;
using uringfwd::engine::OpTag;
using uringfwd::uring::Completion;
using uringfwd::uring::Ring;
using uringfwd::uring::UniqueFd;

constexpr unsigned kRingEntries = 4096;

// Submits the prepared batch and reaps until all `count` completions are in, decoding
// each tag as the shard's dispatch does. Returns false if the kernel reported errors.
bool reap(Ring& ring, unsigned count, uint64_t& checksum) {
    unsigned reaped = 0;
    bool ok = true;
    while (reaped < count) {
        for (const Completion& c : ring.submit_and_wait(count - reaped)) {
            OpTag t = OpTag::decode(c.user_data);
            checksum += t.slot;
            // A poll returns its ready mask; a timeout returns -ETIME: both are fine.
            ok = ok && (c.result >= 0 || c.result == -ETIME);
            ++reaped;
        }
    }
    return ok;
}

uint64_t tag_for(unsigned i) {
    return OpTag::for_connection(Op::PollIn, i, 1).encode();
}

// range(0) polls on a readable eventfd per submit_and_wait; reported per completion.
void BM_Ring_PollReadyEventfd(benchmark::State& state) {
    const auto batch = static_cast<unsigned>(state.range(0));
    Ring ring(kRingEntries);
    UniqueFd efd(::eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK)); // counter 1: always readable
    if (!efd) {
        state.SkipWithError("eventfd failed");
        return;
    }
    uint64_t checksum = 0;
    for (auto _ : state) {
        for (unsigned i = 0; i < batch; ++i)
            ring.poll(efd.get(), POLLIN, tag_for(i));
        if (!reap(ring, batch, checksum)) {
            state.SkipWithError("a poll failed");
            return;
        }
    }
    benchmark::DoNotOptimize(checksum);
    state.SetItemsProcessed(state.iterations() * batch);
    state.counters["cqes_per_enter"] =
        static_cast<double>(ring.counters().completions) /
        static_cast<double>(ring.counters().enters ? ring.counters().enters : 1);
}
BENCHMARK(BM_Ring_PollReadyEventfd)->Arg(1)->Arg(8)->Arg(64)->Arg(512);

// range(0) zero-length timeouts per submit_and_wait; reported per completion.
void BM_Ring_Timeout0(benchmark::State& state) {
    const auto batch = static_cast<unsigned>(state.range(0));
    Ring ring(kRingEntries);
    uint64_t checksum = 0;
    for (auto _ : state) {
        for (unsigned i = 0; i < batch; ++i)
            ring.timeout(std::chrono::nanoseconds{0}, tag_for(i));
        if (!reap(ring, batch, checksum)) {
            state.SkipWithError("a timeout failed");
            return;
        }
    }
    benchmark::DoNotOptimize(checksum);
    state.SetItemsProcessed(state.iterations() * batch);
    state.counters["cqes_per_enter"] =
        static_cast<double>(ring.counters().completions) /
        static_cast<double>(ring.counters().enters ? ring.counters().enters : 1);
}
BENCHMARK(BM_Ring_Timeout0)->Arg(1)->Arg(8)->Arg(64)->Arg(512);

} // namespace
