#include "ops/access_log.hpp"

#include "ops/access_log_line.hpp"
#include "uringfwd/log.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <utility>
#include <vector>

namespace uringfwd::ops {
namespace {

int open_log(const std::string& path) {
    return ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
}

} // namespace

// One shard's buffer. head: bytes the shard has published (it alone writes it); tail:
// bytes the writer has consumed (it alone writes it). Each on its own cache line, so
// the shard's store does not bounce the line the writer polls and the other way round.
struct AccessLog::Ring {
    explicit Ring(std::size_t capacity) : data(capacity) {}
    std::vector<char> data;
    alignas(64) std::atomic<uint64_t> head{0};
    std::atomic<uint64_t> lines{0};   // shard only
    std::atomic<uint64_t> dropped{0}; // shard only
    std::string scratch;              // shard only: the line being formatted
    alignas(64) std::atomic<uint64_t> tail{0};
};

AccessLog::AccessLog(std::string path, AccessLogFormat format,
                     std::chrono::milliseconds flush_every, std::size_t ring_bytes)
    : path_(std::move(path)), format_(format), flush_every_(flush_every), ring_bytes_(ring_bytes),
      rings_(std::make_unique<std::atomic<Ring*>[]>(kSlots)) {
    if (path_ == "-") {
        fd_ = STDERR_FILENO;
    } else {
        fd_ = open_log(path_);
        if (fd_ < 0)
            throw std::runtime_error("access log " + path_ +
                                     ": cannot open: " + std::strerror(errno));
    }
    writer_ = std::thread([this] { writer_loop(); });
}

AccessLog::~AccessLog() {
    stop();
    if (fd_ >= 0 && fd_ != STDERR_FILENO)
        ::close(fd_);
    for (std::size_t i = 0; i < kSlots; ++i)
        delete rings_[i].load(std::memory_order_acquire);
}

AccessLog::Ring* AccessLog::ring_of(int shard) {
    if (shard < 0 || static_cast<std::size_t>(shard) >= kSlots)
        return nullptr;
    std::atomic<Ring*>& slot = rings_[static_cast<std::size_t>(shard)];
    // Only this shard's thread stores into its slot, so a relaxed load sees its own store.
    Ring* ring = slot.load(std::memory_order_relaxed);
    if (ring == nullptr) {
        ring = new Ring(ring_bytes_);
        slot.store(ring, std::memory_order_release); // the writer acquires it
    }
    return ring;
}

void AccessLog::on_close(const ConnectionRecord& record) {
    // Carried on by the process it was handed over to, which logs it once, when it
    // really ends, with its whole history (docs/handover.md).
    if (record.reason == CloseReason::HandedOver)
        return;
    Ring* ring = ring_of(record.info.shard);
    if (ring == nullptr) {
        out_of_range_.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    ring->scratch.clear();
    append_access_line(ring->scratch, format_, record, std::chrono::system_clock::now());
    const std::size_t n = ring->scratch.size();
    const std::size_t cap = ring->data.size();
    const uint64_t head = ring->head.load(std::memory_order_relaxed);
    const uint64_t tail = ring->tail.load(std::memory_order_acquire); // bytes now free
    const auto bump = [](std::atomic<uint64_t>& v) {
        v.store(v.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    };
    if (cap - (head - tail) < n) {
        bump(ring->dropped);
        return;
    }
    const std::size_t at = head % cap;
    const std::size_t first = std::min(n, cap - at);
    std::memcpy(ring->data.data() + at, ring->scratch.data(), first);
    std::memcpy(ring->data.data(), ring->scratch.data() + first, n - first);
    ring->head.store(head + n, std::memory_order_release); // publishes the bytes
    bump(ring->lines);
}

void AccessLog::reopen() {
    {
        std::lock_guard lock(mu_);
        reopen_wanted_ = true;
    }
    wake_.notify_one();
}

void AccessLog::stop() {
    {
        std::lock_guard lock(mu_);
        if (stopping_ && !writer_.joinable())
            return;
        stopping_ = true;
    }
    wake_.notify_one();
    if (writer_.joinable())
        writer_.join();
}

void AccessLog::writer_loop() {
    for (;;) {
        bool stopping = false;
        bool reopen = false;
        {
            std::unique_lock lock(mu_);
            wake_.wait_for(lock, flush_every_, [this] { return stopping_ || reopen_wanted_; });
            stopping = stopping_;
            reopen = std::exchange(reopen_wanted_, false);
        }
        flush_all();
        if (reopen)
            reopen_file();
        if (stopping) {
            flush_all();
            return;
        }
    }
}

bool AccessLog::flush_all() {
    bool wrote = false;
    for (std::size_t i = 0; i < kSlots; ++i) {
        Ring* ring = rings_[i].load(std::memory_order_acquire);
        if (ring == nullptr)
            continue;
        const uint64_t head = ring->head.load(std::memory_order_acquire);
        const uint64_t tail = ring->tail.load(std::memory_order_relaxed);
        if (head == tail)
            continue;
        const std::size_t cap = ring->data.size();
        const std::size_t at = tail % cap;
        const std::size_t n = head - tail;
        const std::size_t first = std::min(n, cap - at);
        iovec parts[2] = {{ring->data.data() + at, first}, {ring->data.data(), n - first}};
        int count = n > first ? 2 : 1;
        std::size_t left = n;
        while (left > 0) {
            ssize_t w = ::writev(fd_, parts, count);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                // The disk is full or gone: what was not written is lost, and counted.
                uint64_t lost = 0;
                for (int p = 0; p < count; ++p) {
                    const char* b = static_cast<const char*>(parts[p].iov_base);
                    lost += static_cast<uint64_t>(std::count(b, b + parts[p].iov_len, '\n'));
                }
                write_failures_.store(write_failures_.load(std::memory_order_relaxed) + lost,
                                      std::memory_order_relaxed);
                break;
            }
            left -= static_cast<std::size_t>(w);
            auto done = static_cast<std::size_t>(w);
            for (int p = 0; p < count && done > 0; ++p) {
                const std::size_t take = std::min(done, parts[p].iov_len);
                parts[p].iov_base = static_cast<char*>(parts[p].iov_base) + take;
                parts[p].iov_len -= take;
                done -= take;
            }
        }
        ring->tail.store(head, std::memory_order_release); // the shard may reuse the bytes
        wrote = true;
    }
    return wrote;
}

void AccessLog::reopen_file() {
    reopens_.fetch_add(1, std::memory_order_relaxed);
    if (fd_ == STDERR_FILENO)
        return;
    int fresh = open_log(path_);
    if (fresh < 0) {
        // The binary's format (cli/process_log.hpp), under this part's own prefix.
        write_log_line({}, LogLevel::Warn, "access log",
                       fmt::format("{}: cannot reopen: {}; still writing to the file opened "
                                   "before",
                                   path_, std::strerror(errno)));
        return;
    }
    ::close(fd_);
    fd_ = fresh;
}

uint64_t AccessLog::lines() const {
    uint64_t n = 0;
    for (std::size_t i = 0; i < kSlots; ++i)
        if (const Ring* ring = rings_[i].load(std::memory_order_acquire))
            n += ring->lines.load(std::memory_order_relaxed);
    // A line lost to a failed write is counted as dropped instead.
    return n - std::min(n, write_failures_.load(std::memory_order_relaxed));
}

uint64_t AccessLog::dropped() const {
    uint64_t n = write_failures_.load(std::memory_order_relaxed) +
                 out_of_range_.load(std::memory_order_relaxed);
    for (std::size_t i = 0; i < kSlots; ++i)
        if (const Ring* ring = rings_[i].load(std::memory_order_acquire))
            n += ring->dropped.load(std::memory_order_relaxed);
    return n;
}

uint64_t AccessLog::reopens() const {
    return reopens_.load(std::memory_order_relaxed);
}

} // namespace uringfwd::ops
