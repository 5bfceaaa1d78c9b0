#include "tests/support/proc_stats.hpp"

#include <dirent.h>

#include <fmt/core.h>
#include <fstream>
#include <sstream>
#include <string>

namespace uringfwd::test {
namespace {

std::string proc_dir(pid_t pid) {
    return pid == 0 ? std::string("/proc/self") : fmt::format("/proc/{}", pid);
}

// Calls `fn` for each entry name (not "." or "..") of `dir`; false if unreadable.
template <typename Fn> bool for_each_entry(const std::string& dir, Fn fn) {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) {
        return false;
    }
    while (const dirent* e = ::readdir(d)) {
        const std::string_view name = e->d_name;
        if (name != "." && name != "..") {
            fn(name);
        }
    }
    ::closedir(d);
    return true;
}

} // namespace

int count_open_fds(pid_t pid) {
    int count = 0;
    if (!for_each_entry(proc_dir(pid) + "/fd", [&](std::string_view) { ++count; })) {
        return -1;
    }
    // Reading /proc/self/fd holds one more fd (the directory) while counting.
    return pid == 0 ? count - 1 : count;
}

uint64_t resident_bytes(pid_t pid) {
    std::ifstream in(proc_dir(pid) + "/status");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("VmRSS:", 0) == 0) {
            std::istringstream fields(line.substr(6));
            uint64_t kib = 0;
            fields >> kib;
            return kib * 1024;
        }
    }
    return 0;
}

int count_threads_with_prefix(pid_t pid, std::string_view prefix) {
    const std::string task_dir = proc_dir(pid) + "/task";
    int count = 0;
    for_each_entry(task_dir, [&](std::string_view tid) {
        std::ifstream in(task_dir + "/" + std::string(tid) + "/comm");
        std::string comm;
        std::getline(in, comm);
        if (comm.rfind(prefix, 0) == 0) {
            ++count;
        }
    });
    return count;
}

std::map<std::string, int> threads_by_comm(pid_t pid, std::string_view prefix) {
    const std::string task_dir = proc_dir(pid) + "/task";
    std::map<std::string, int> out;
    for_each_entry(task_dir, [&](std::string_view tid) {
        std::ifstream in(task_dir + "/" + std::string(tid) + "/comm");
        std::string comm;
        std::getline(in, comm);
        if (comm.rfind(prefix, 0) == 0) {
            ++out[comm];
        }
    });
    return out;
}

} // namespace uringfwd::test
