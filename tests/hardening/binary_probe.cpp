#include "tests/hardening/binary_probe.hpp"

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fmt/core.h>
#include <fstream>
#include <sstream>
#include <thread>

namespace uringfwd::test {
namespace {

constexpr std::string_view kTotalMarker = "uring-fwd: total: ";

} // namespace

std::size_t count_occurrences(const std::string& text, const std::string& needle) {
    std::size_t count = 0;
    for (auto pos = text.find(needle); pos != std::string::npos;
         pos = text.find(needle, pos + needle.size())) {
        ++count;
    }
    return count;
}

Counters parse_counters(const std::string& line) {
    Counters out;
    std::istringstream words(line);
    std::string word;
    while (words >> word) {
        const auto eq = word.find('=');
        if (eq == std::string::npos) {
            continue;
        }
        try {
            out[word.substr(0, eq)] = std::stoull(word.substr(eq + 1));
        } catch (const std::exception&) {
            // Not a number (e.g. a ratio): not a counter the tests read.
        }
    }
    return out;
}

std::optional<Counters> request_totals(BinaryProcess& process, const Deadline& deadline) {
    const std::size_t before = count_occurrences(process.stderr_text(), std::string(kTotalMarker));
    process.signal(SIGUSR1);
    while (!deadline.expired()) {
        const std::string err = process.stderr_text();
        if (count_occurrences(err, std::string(kTotalMarker)) > before) {
            const auto pos = err.rfind(kTotalMarker);
            const auto end = err.find('\n', pos);
            if (end != std::string::npos) {
                return parse_counters(
                    err.substr(pos + kTotalMarker.size(), end - pos - kTotalMarker.size()));
            }
        }
        std::this_thread::sleep_for(milliseconds{10});
    }
    return std::nullopt;
}

std::optional<std::vector<ShardCounters>> request_shard_counters(BinaryProcess& process,
                                                                 const Deadline& deadline) {
    static constexpr std::string_view kShardMarker = "uring-fwd: shard ";
    if (!request_totals(process, deadline))
        return std::nullopt;
    // The shard lines are the ones printed just before the newest total line. Each
    // line starts with its time and level ("2026-...Z info "), then the marker.
    const std::string err = process.stderr_text();
    std::size_t end = err.rfind(kTotalMarker);
    end = end == std::string::npos ? end : err.rfind('\n', end);
    std::vector<ShardCounters> out;
    // `end` is the '\n' ending the line before the one looked at last.
    while (end != std::string::npos && end >= 1) {
        const std::size_t newline = err.rfind('\n', end - 1);
        const std::size_t begin = newline == std::string::npos ? 0 : newline + 1;
        const std::string line = err.substr(begin, end - begin);
        const std::size_t marker = line.find(kShardMarker);
        if (marker == std::string::npos)
            break;
        ShardCounters shard;
        const std::size_t at = marker + kShardMarker.size();
        const auto colon = line.find(": ", at);
        if (std::sscanf(line.c_str() + at, "%d cpu %d", &shard.shard, &shard.cpu) != 2 ||
            colon == std::string::npos)
            break;
        shard.counters = parse_counters(line.substr(colon + 2));
        out.insert(out.begin(), std::move(shard));
        end = newline;
    }
    return out;
}

double cpu_seconds(pid_t pid) {
    std::ifstream in(fmt::format("/proc/{}/stat", pid));
    std::string stat;
    std::getline(in, stat);
    // The command name may hold spaces; fields are counted after its closing ')'.
    const auto close = stat.rfind(')');
    if (close == std::string::npos) {
        return -1;
    }
    std::istringstream fields(stat.substr(close + 2));
    std::string field;
    unsigned long long utime = 0;
    unsigned long long stime = 0;
    // After ')': state(3) ... utime is field 14, stime 15 of the whole line.
    for (int i = 3; i <= 15 && fields >> field; ++i) {
        if (i == 14) {
            utime = std::stoull(field);
        } else if (i == 15) {
            stime = std::stoull(field);
        }
    }
    return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

int count_pipe_fds(pid_t pid) {
    const std::string dir = fmt::format("/proc/{}/fd", pid);
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) {
        return -1;
    }
    int pipes = 0;
    char target[256];
    while (const dirent* e = ::readdir(d)) {
        const std::string path = dir + "/" + e->d_name;
        const ssize_t n = ::readlink(path.c_str(), target, sizeof(target) - 1);
        if (n > 0 && std::string_view(target, static_cast<std::size_t>(n)).starts_with("pipe:")) {
            ++pipes;
        }
    }
    ::closedir(d);
    return pipes;
}

bool process_alive(pid_t pid) {
    std::ifstream in(fmt::format("/proc/{}/stat", pid));
    std::string stat;
    if (!std::getline(in, stat)) {
        return false;
    }
    const auto close = stat.rfind(')');
    return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z' &&
           stat[close + 2] != 'X';
}

} // namespace uringfwd::test
