// The CPUs this process may use, and pinning the calling thread to one of them.
#pragma once

#include <vector>

namespace uringfwd::engine {

// The calling thread's affinity mask (inherited from taskset, cgroup cpusets...).
std::vector<int> allowed_cpus();

// Pins the calling thread to `cpu`. Returns 0 or an errno.
int pin_current_thread(int cpu);

} // namespace uringfwd::engine
