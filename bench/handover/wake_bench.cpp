// How should another thread wake a shard that sleeps in io_uring_enter? The ways issue
// 11 asks to compare, and one more, measured alone (no engine around them):
//
//   eventfd   what the shard does: the shard keeps a one-shot poll on an eventfd
//             armed; the waker write()s the eventfd; the shard gets the poll's
//             completion, read()s the eventfd to clear it and re-arms the poll.
//   eventfd_read  the same eventfd, but the shard keeps an IORING_OP_READ of it armed
//             instead of a poll, so the completion that wakes it has read the counter
//             already: no read(2) of its own. Tried for the hand-over (RESULTS.md run 7)
//             and not kept: the wake-up is slower by about what the read(2) cost.
//   msg_ring  IORING_OP_MSG_RING (Linux 5.18): the waker submits, on a ring of its own,
//             an SQE that posts a completion straight into the shard's ring. Nothing to
//             clear or re-arm on the shard's side, but every waking thread needs a ring.
//
// The waiting ring is set up as a shard's is (uring/ring.cpp: SINGLE_ISSUER |
// DEFER_TASKRUN | SUBMIT_ALL), on its own CPU; the waker runs on another CPU. Each
// wake-up is taken one at a time, with a pause between them so the waiter is asleep
// again when the next one comes (a hand-over reaches an idle or busy shard; asleep is
// the slower case). The modes alternate in rounds, so drift on a shared machine hits
// both alike.
//
// Reported per mode, as medians over rounds of each round's median:
//   latency   from just before the waker's call to the waiter returning from its wait
//   waker     the waker's call alone (what Engine::forward's caller pays)
//   waiter    CPU time of the waiter thread per wake-up (completion, clear, re-arm)
//
// Build: meson setup build-micro -Dbench=true -Dtests=false && ninja -C build-micro
// Run:   build-micro/bench/wake_bench [rounds] [wakes-per-round]
#include "bench_util.hpp"

#include <liburing.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iterator>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

using namespace handover_bench_util;

enum class Mode { EventFd, EventFdRead, MsgRing };
constexpr Mode kModes[] = {Mode::EventFd, Mode::EventFdRead, Mode::MsgRing};
const char* name(Mode mode) {
    switch (mode) {
    case Mode::EventFd:
        return "eventfd";
    case Mode::EventFdRead:
        return "eventfd_read";
    case Mode::MsgRing:
        break;
    }
    return "msg_ring";
}

constexpr uint64_t kWakeTag = 1;

struct Shared {
    std::atomic<uint64_t> sent_at{0}; // written by the waker before each wake-up
    std::atomic<uint64_t> woke_at{0}; // written by the waiter once awake
    std::atomic<int> target_ring_fd{-1};
    std::atomic<bool> ready{false};
};

struct RoundResult {
    std::vector<uint64_t> latency_ns, waker_ns;
    uint64_t waiter_cpu_ns = 0;
};

// One waiter thread per round: a fresh ring, as a shard has.
void waiter(Mode mode, int wakes, int cpu, int event_fd, Shared& shared, uint64_t& cpu_ns) {
    pin(cpu);
    io_uring ring{};
    io_uring_params params{};
    params.flags =
        IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_SUBMIT_ALL;
    if (int r = io_uring_queue_init_params(64, &ring, &params); r < 0)
        die("io_uring_queue_init_params", -r);
    uint64_t value = 0; // where eventfd_read's read puts the counter
    auto arm = [&] {
        io_uring_sqe* sqe = io_uring_get_sqe(&ring);
        if (mode == Mode::EventFdRead)
            io_uring_prep_read(sqe, event_fd, &value, sizeof(value), 0);
        else
            io_uring_prep_poll_add(sqe, event_fd, POLLIN);
        io_uring_sqe_set_data64(sqe, kWakeTag);
    };
    if (mode != Mode::MsgRing)
        arm();
    io_uring_submit(&ring);
    shared.target_ring_fd.store(ring.ring_fd);
    shared.ready.store(true);
    uint64_t cpu_start = now_ns(CLOCK_THREAD_CPUTIME_ID);
    for (int i = 0; i < wakes; ++i) {
        io_uring_cqe* cqe = nullptr;
        // submit_and_wait: a re-armed poll goes in with the same enter, as in the shard.
        int r = io_uring_submit_and_wait(&ring, 1);
        if (r < 0)
            die("io_uring_submit_and_wait", -r);
        if (io_uring_peek_cqe(&ring, &cqe) != 0)
            die("no completion", EIO);
        if (mode == Mode::EventFdRead && cqe->res != sizeof(value))
            die("read eventfd through the ring", cqe->res < 0 ? -cqe->res : EIO);
        io_uring_cqe_seen(&ring, cqe);
        if (mode == Mode::EventFd) {
            if (::read(event_fd, &value, sizeof(value)) != sizeof(value))
                die("read eventfd", errno);
        }
        if (mode != Mode::MsgRing)
            arm();
        shared.woke_at.store(now_ns(), std::memory_order_release);
    }
    cpu_ns = now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu_start;
    io_uring_queue_exit(&ring);
}

RoundResult round(Mode mode, int wakes, int waker_cpu, int waiter_cpu) {
    RoundResult result;
    Shared shared;
    int event_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (event_fd < 0)
        die("eventfd", errno);
    std::thread thread(waiter, mode, wakes, waiter_cpu, event_fd, std::ref(shared),
                       std::ref(result.waiter_cpu_ns));
    pin(waker_cpu);
    while (!shared.ready.load())
        std::this_thread::yield();
    io_uring sender{};
    if (mode == Mode::MsgRing)
        if (int r = io_uring_queue_init(8, &sender, 0); r < 0)
            die("io_uring_queue_init", -r);
    for (int i = 0; i < wakes; ++i) {
        // Let the waiter fall asleep again: 50 µs is several times its wake-up path.
        timespec pause{0, 50'000};
        nanosleep(&pause, nullptr);
        uint64_t before = shared.woke_at.load();
        uint64_t t0 = now_ns();
        if (mode != Mode::MsgRing) {
            uint64_t one = 1;
            if (::write(event_fd, &one, sizeof(one)) != sizeof(one))
                die("write eventfd", errno);
        } else {
            io_uring_sqe* sqe = io_uring_get_sqe(&sender);
            io_uring_prep_msg_ring(sqe, shared.target_ring_fd.load(), 0, kWakeTag, 0);
            // The waker wants no completion of its own: nothing to reap per wake-up.
            sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
            if (int r = io_uring_submit(&sender); r != 1)
                die("io_uring_submit(MSG_RING)", r < 0 ? -r : EIO);
        }
        uint64_t t1 = now_ns();
        uint64_t woke = 0;
        while ((woke = shared.woke_at.load(std::memory_order_acquire)) == before)
            ;
        result.latency_ns.push_back(woke - t0);
        result.waker_ns.push_back(t1 - t0);
    }
    thread.join();
    if (mode == Mode::MsgRing)
        io_uring_queue_exit(&sender);
    ::close(event_fd);
    return result;
}

} // namespace

int main(int argc, char** argv) {
    int rounds = argc > 1 ? std::atoi(argv[1]) : 7;
    int wakes = argc > 2 ? std::atoi(argv[2]) : 3000;
    int cpus = int(std::thread::hardware_concurrency());
    int waker_cpu = 0, waiter_cpu = cpus > 1 ? 1 : 0;
    std::printf("wake_bench: %d rounds x %d wake-ups per mode, waker on CPU %d, waiter on CPU %d\n",
                rounds, wakes, waker_cpu, waiter_cpu);
    struct Summary {
        std::vector<double> latency_median, latency_p99, waker_median, waiter_cpu;
    };
    Summary summary[std::size(kModes)];
    for (int r = 0; r < rounds; ++r) {
        for (Mode mode : kModes) {
            RoundResult result = round(mode, wakes, waker_cpu, waiter_cpu);
            Summary& s = summary[int(mode)];
            s.latency_median.push_back(percentile(result.latency_ns, 0.5) / 1000);
            s.latency_p99.push_back(percentile(result.latency_ns, 0.99) / 1000);
            s.waker_median.push_back(percentile(result.waker_ns, 0.5) / 1000);
            s.waiter_cpu.push_back(double(result.waiter_cpu_ns) / wakes / 1000);
        }
    }
    std::printf("%-12s %12s %12s %12s %14s\n", "mode", "latency µs", "p99 µs", "waker µs",
                "waiter CPU µs");
    for (Mode mode : kModes) {
        const Summary& s = summary[int(mode)];
        std::printf("%-12s %12.2f %12.2f %12.2f %14.2f\n", name(mode), median(s.latency_median),
                    median(s.latency_p99), median(s.waker_median), median(s.waiter_cpu));
    }
    return 0;
}
