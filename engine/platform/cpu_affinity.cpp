#include "platform/cpu_affinity.hpp"

#include <fmt/format.h>

#include <dirent.h>
#include <pthread.h>
#include <sched.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace uringfwd::engine {

namespace {
std::vector<int> cpus_in(const cpu_set_t& set) {
    std::vector<int> cpus;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
        if (CPU_ISSET(cpu, &set))
            cpus.push_back(cpu);
    return cpus;
}
} // namespace

std::vector<int> allowed_cpus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0)
        return {};
    return cpus_in(set);
}

int pin_current_thread(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

std::vector<int> io_worker_cpus(int owner_tid) {
    const std::string worker_name = fmt::format("iou-wrk-{}", owner_tid);
    cpu_set_t all;
    CPU_ZERO(&all);
    DIR* dir = ::opendir("/proc/self/task");
    if (dir == nullptr)
        return {};
    while (const dirent* entry = ::readdir(dir)) {
        if (entry->d_name[0] == '.')
            continue;
        std::ifstream comm(fmt::format("/proc/self/task/{}/comm", entry->d_name));
        std::string name;
        if (!std::getline(comm, name) || name != worker_name)
            continue;
        cpu_set_t set;
        CPU_ZERO(&set);
        // sched_getaffinity(2) takes any thread's id: a worker's mask, as the kernel set it.
        if (sched_getaffinity(std::atoi(entry->d_name), sizeof(set), &set) == 0)
            CPU_OR(&all, &all, &set);
    }
    ::closedir(dir);
    return cpus_in(all);
}

} // namespace uringfwd::engine
