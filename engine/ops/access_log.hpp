// The access log: a ConnectionObserver that writes one line per closed connection
// (access_log_line.hpp) to a file or stderr, without ever making a shard wait.
//
// Each shard formats its line on its own thread into a buffer of its own, a single-
// producer single-consumer ring (no lock, no locked instruction: a release store of
// the ring's head); one writer thread empties every ring in batches with write(2). When
// a ring is full (the disk cannot keep up), the line is dropped and counted: a shard
// never waits for the disk. SIGUSR2 (reopen()) makes the writer flush what it holds to
// the file as it was and then open the path again, for logrotate's rename.
#pragma once

#include "uringfwd/observer.hpp"
#include "uringfwd/operations.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace uringfwd::ops {

class AccessLog final : public ConnectionObserver {
public:
    // "-" is stderr. Throws std::runtime_error (the message names the path and the
    // reason) when the file cannot be opened. `ring_bytes`: each shard's buffer.
    // `flush_every`: how long a line may wait in its ring when nothing else wakes the
    // writer (OperationsConfig::access_log_flush).
    AccessLog(std::string path, AccessLogFormat format,
              std::chrono::milliseconds flush_every = std::chrono::milliseconds(50),
              std::size_t ring_bytes = 1 << 20);
    ~AccessLog() override; // stop()

    AccessLog(const AccessLog&) = delete;
    AccessLog& operator=(const AccessLog&) = delete;

    void on_open(const ConnectionInfo&) override {}
    void on_close(const ConnectionRecord& record) override;

    // Any thread: reopen the path once what is buffered is written (async).
    void reopen();
    // Writes everything buffered and ends the writer; call once the engine has
    // stopped, or lines closed later are only counted as dropped.
    void stop();

    uint64_t lines() const;   // lines written, or buffered to be
    uint64_t dropped() const; // lines lost: a full ring or a failed write
    uint64_t reopens() const; // reopen() requests carried out

private:
    struct Ring;
    static constexpr std::size_t kSlots = 4096; // shard indexes (one per CPU at most)

    Ring* ring_of(int shard);
    void writer_loop();
    bool flush_all(); // true when it wrote anything
    void reopen_file();

    const std::string path_;
    const AccessLogFormat format_;
    const std::chrono::milliseconds flush_every_;
    const std::size_t ring_bytes_;
    int fd_ = -1;                                 // the writer's; stderr for "-"
    std::unique_ptr<std::atomic<Ring*>[]> rings_; // allocated by each shard on first use
    std::atomic<uint64_t> write_failures_{0};     // lines, written by the writer only
    std::atomic<uint64_t> reopens_{0};
    std::atomic<uint64_t> out_of_range_{0}; // a shard index >= kSlots (never, in practice)

    std::mutex mu_;
    std::condition_variable wake_;
    bool stopping_ = false;
    bool reopen_wanted_ = false;
    std::thread writer_;
};

} // namespace uringfwd::ops
