// The CPUs this process may use, pinning the calling thread to one of them, and the CPUs
// the kernel gave a thread's io-wq workers.
#pragma once

#include <vector>

namespace uringfwd::engine {

// The calling thread's affinity mask (inherited from taskset, cgroup cpusets...).
std::vector<int> allowed_cpus();

// Pins the calling thread to `cpu`. Returns 0 or an errno.
int pin_current_thread(int cpu);

// The CPUs the io-wq workers of thread `owner_tid` may run on, all of them together (a
// worker is a thread of this process named "iou-wrk-<owner's tid>",
// io_uring/io-wq.c io_wq_worker). Empty when no such worker exists now.
std::vector<int> io_worker_cpus(int owner_tid);

} // namespace uringfwd::engine
