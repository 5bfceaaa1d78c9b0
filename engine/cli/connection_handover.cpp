#include "cli/connection_handover.hpp"
#include "cli/seqpacket.hpp"
#include "uringfwd/messages.hpp"

#include <fmt/format.h>

#include <sys/ioctl.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace uringfwd::cli {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr std::string_view kBatch = "conns";
constexpr std::string_view kBatchWithPipes = "conns+pipes";
constexpr std::string_view kAdopted = "adopted ";
constexpr std::size_t kFieldsPerRecord = 6;
constexpr std::size_t kFieldsPerRecordWithPipes = 8; // and the bytes in each pipe
// A record is two names (a route's, a member's: at most a Unix path of 107 bytes and a
// host name of 255) and four numbers: well under 1 KiB.
constexpr std::size_t kMaxBatchBytes = 16 + kConnectionsPerBatch * 1024;

int64_t ticks(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

Clock::time_point from_ticks(std::string_view text) {
    return Clock::time_point(
        std::chrono::nanoseconds(std::strtoll(std::string(text).c_str(), nullptr, 10)));
}

uint64_t number(std::string_view text) {
    return std::strtoull(std::string(text).c_str(), nullptr, 10);
}

void append_field(std::string& out, std::string_view field) {
    out += field;
    out += '\0';
}

constexpr Toward kTowards[] = {Toward::Upstream, Toward::Client};

// The connections of `batch` from `first` whose fds fit in one message (at least one).
std::size_t fitting(const std::vector<DetachedConnection>& batch, std::size_t first) {
    std::size_t fds = 0;
    std::size_t end = first;
    while (end < batch.size() && (end == first || fds + batch[end].fd_count() <= kFdsPerMessage))
        fds += batch[end++].fd_count();
    return end;
}

void send_batch(int fd, const std::vector<DetachedConnection>& batch, std::size_t first,
                std::size_t end, bool with_pipes) {
    std::string text(with_pipes ? kBatchWithPipes : kBatch);
    text += '\0';
    std::vector<int> fds;
    for (std::size_t i = first; i < end; ++i) {
        const DetachedConnection& c = batch[i];
        append_field(text, c.route);
        append_field(text, c.member);
        append_field(text, std::to_string(c.bytes_to_upstream));
        append_field(text, std::to_string(c.bytes_to_client));
        append_field(text, std::to_string(ticks(c.opened_at)));
        append_field(text, std::to_string(ticks(c.connected_at)));
        fds.push_back(c.client_fd());
        fds.push_back(c.upstream_fd());
        if (!with_pipes)
            continue; // it holds none: the engine detached it only once they were empty
        for (Toward toward : kTowards) {
            const UnsentPipe& pipe = c.unsent(toward);
            // The receiver expects a pipe's two fds exactly when its count is above 0;
            // an empty pipe is not sent (it closes with this process's copy).
            const bool sent = pipe.read_fd >= 0 && pipe.bytes > 0;
            append_field(text, std::to_string(sent ? pipe.bytes : 0));
            if (sent) {
                fds.push_back(pipe.read_fd);
                fds.push_back(pipe.write_fd);
            }
        }
    }
    send_message(fd, text, fds.data(), fds.size());
}

std::vector<std::string_view> split_fields(std::string_view text) {
    std::vector<std::string_view> out;
    while (!text.empty()) {
        const std::size_t end = text.find('\0');
        out.push_back(text.substr(0, end));
        if (end == std::string_view::npos)
            break;
        text.remove_prefix(end + 1);
    }
    return out;
}

long long millis_since(Clock::time_point start) {
    return static_cast<long long>(
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count());
}

// Neither side gives up on the other by the clock. The next batch may be long in coming
// (a connection that is never quiet keeps the old process until its drain timeout);
// and an answer must never be given up on while the successor lives: it may hold the
// batch already, and a connection both processes served would be torn apart. A
// process that ends closes its end, which the other sees at once.
void wait_without_timeout(int fd) {
    timeval none{0, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none));
}

// Whether each pipe of `c` still holds what its record says: what the old process takes
// back from a successor that went away mid-message may have been drained there.
bool pipes_as_sent(const DetachedConnection& c) {
    for (Toward toward : kTowards) {
        const UnsentPipe& pipe = c.unsent(toward);
        int queued = 0;
        if (pipe.read_fd >= 0 && pipe.bytes > 0 &&
            (::ioctl(pipe.read_fd, FIONREAD, &queued) != 0 ||
             static_cast<uint64_t>(queued) != pipe.bytes))
            return false;
    }
    return true;
}

// Both peers see an error, not a clean end: SO_LINGER 0 makes close() send a RST
// (socket(7)). The sockets and pipes close with `c`.
void reset_sockets(DetachedConnection& c) {
    const linger abort{1, 0};
    ::setsockopt(c.client_fd(), SOL_SOCKET, SO_LINGER, &abort, sizeof(abort));
    ::setsockopt(c.upstream_fd(), SOL_SOCKET, SO_LINGER, &abort, sizeof(abort));
}

} // namespace

ConnectionSender::ConnectionSender(ops::UniqueFd conversation, Engine& engine,
                                   const ProcessLog& log, pid_t successor, bool with_pipes)
    : conversation_(std::move(conversation)), engine_(engine), log_(log), successor_(successor),
      with_pipes_(with_pipes) {
    wait_without_timeout(conversation_.get());
    // Before the caller stops the engine, not on the thread: a shard that holds no
    // connection when it stops ends at once unless a hand-over is on, and then a
    // connection the successor refuses could not come back to it (deliver() would
    // find it ended: ConnectionHandover.AConnectionTheSuccessorRefuses... reset its
    // client about one run in sixty).
    engine_.begin_handover(with_pipes_ ? UnsentBytes::GoAlong : UnsentBytes::StayHere);
    thread_ = std::thread([this] { run(); });
}

ConnectionSender::~ConnectionSender() {
    if (thread_.joinable())
        thread_.join();
}

void ConnectionSender::run() {
    const Clock::time_point start = Clock::now();
    std::size_t moved = 0;
    std::size_t kept = 0;
    bool gone = false;
    // Ours again: the successor refused it or went away before it said it holds it.
    auto take_back = [&](DetachedConnection&& c) {
        ++kept;
        if (const std::error_code error = engine_.adopt(std::move(c)))
            log_.warn("upgrade: a connection the successor did not take could not be "
                      "served on ({}); it is closed",
                      error.message());
    };
    for (;;) {
        // Asked before the queue: once the shards hold none, everything they detached
        // is in the queue already.
        const bool none_left = engine_.open_connections() == 0;
        std::vector<DetachedConnection> batch = engine_.take_detached(kConnectionsPerBatch, 50ms);
        if (batch.empty()) {
            if (none_left)
                break;
            continue;
        }
        if (!with_pipes_) {
            // A successor that takes no pipes gets no connection holding one (a move
            // under way as the hand-over began may detach one with its pipe): its
            // bytes would be lost. It stays here and is served to its end.
            std::erase_if(batch, [&](DetachedConnection& c) {
                if (c.fd_count() <= 2)
                    return false;
                take_back(std::move(c));
                return true;
            });
            if (batch.empty())
                continue;
        }
        // A batch goes in as many messages as its fds need, each answered before the next.
        for (std::size_t first = 0; first < batch.size();) {
            const std::size_t end = fitting(batch, first);
            std::string reply;
            try {
                send_batch(conversation_.get(), batch, first, end, with_pipes_);
                reply = receive_message(conversation_.get(), nullptr,
                                        kAdopted.size() + (end - first) + 1);
                if (!reply.starts_with(kAdopted) || reply.size() != kAdopted.size() + (end - first))
                    throw std::runtime_error(
                        fmt::format("upgrade socket: unexpected answer '{}'", reply));
            } catch (const std::exception& e) {
                log_.warn("upgrade: {}; process {} gets no more connections, the rest are "
                          "served here",
                          e.what(), static_cast<int>(successor_));
                gone = true;
            }
            for (std::size_t i = first; i < (gone ? batch.size() : end); ++i) {
                if (!gone && reply[kAdopted.size() + (i - first)] == '1') {
                    ++moved; // ours closes with `batch`; the successor's copy carries it on
                } else if (gone && i < end && !pipes_as_sent(batch[i])) {
                    // The successor had it, drained its pipe (and may have pooled it for
                    // another connection) and died before it answered: resuming it would
                    // splice bytes that are not its own, or wait for ones that are gone.
                    log_.warn("upgrade: a connection whose pipe the successor used before "
                              "it went away is reset");
                    reset_sockets(batch[i]);
                } else {
                    take_back(std::move(batch[i]));
                }
            }
            if (gone)
                break;
            first = end;
        }
        if (gone)
            break;
    }
    // Detached after the last batch was taken: the engine carries them on as the
    // hand-over ends.
    const HandoverEnd ended = engine_.end_handover();
    kept += ended.carried_on;
    if (ended.lost > 0)
        log_.warn("upgrade: {} connection(s) detached for the successor could not be served "
                  "on; they are closed",
                  ended.lost);
    if (!gone) {
        try {
            send_message(conversation_.get(), fmt::format("end {}", moved));
        } catch (const std::exception&) {
        }
    }
    log_.info("upgrade: handed {} over to process {} in {} ms{}", count_of(moved, "connection"),
              static_cast<int>(successor_), millis_since(start),
              kept > 0 ? fmt::format("; {} kept here", count_of(kept, "connection"))
                       : std::string());
    done_.store(true, std::memory_order_release);
}

ConnectionReceiver::ConnectionReceiver(ops::UniqueFd conversation, Engine& engine,
                                       const ProcessLog& log, pid_t old_process)
    : conversation_(std::move(conversation)), engine_(engine), log_(log),
      old_process_(old_process) {
    wait_without_timeout(conversation_.get());
    thread_ = std::thread([this] { run(); });
}

ConnectionReceiver::~ConnectionReceiver() {
    ::shutdown(conversation_.get(), SHUT_RDWR); // wakes the receive: it ends
    if (thread_.joinable())
        thread_.join();
}

void ConnectionReceiver::run() {
    const Clock::time_point start = Clock::now();
    std::size_t adopted = 0;
    std::size_t refused = 0;
    std::string ended_by = "it ended";
    for (;;) {
        std::vector<ops::UniqueFd> fds;
        std::string message;
        try {
            message = receive_message(conversation_.get(), &fds, kMaxBatchBytes);
        } catch (const std::exception& e) {
            // What it sent with this message is closed (our copies): the old process
            // has not heard from us, and keeps its own.
            ended_by = e.what();
            break;
        }
        if (message.starts_with("end")) {
            ended_by.clear();
            break;
        }
        std::vector<std::string_view> fields = split_fields(message);
        const bool with_pipes = !fields.empty() && fields.front() == kBatchWithPipes;
        if (fields.empty() || (fields.front() != kBatch && !with_pipes)) {
            ended_by = fmt::format("unexpected message '{}'", fields.empty() ? "" : fields.front());
            break;
        }
        fields.erase(fields.begin());
        std::string reply(kAdopted);
        const std::size_t per_record = with_pipes ? kFieldsPerRecordWithPipes : kFieldsPerRecord;
        const std::size_t records = fields.size() / per_record;
        std::size_t next_fd = 0; // the fds come in the records' order
        auto take_fd = [&]() { return next_fd < fds.size() ? fds[next_fd++].release() : -1; };
        for (std::size_t i = 0; i < records; ++i) {
            const std::string_view* f = &fields[i * per_record];
            const std::size_t needs = 2 + (with_pipes && number(f[6]) > 0 ? 2 : 0) +
                                      (with_pipes && number(f[7]) > 0 ? 2 : 0);
            if (next_fd + needs > fds.size()) { // fewer fds than records: not for us
                next_fd = fds.size();
                reply += '0';
                continue;
            }
            const int client = take_fd();
            DetachedConnection c(client, take_fd());
            c.route = f[0];
            c.member = f[1];
            c.bytes_to_upstream = number(f[2]);
            c.bytes_to_client = number(f[3]);
            c.opened_at = from_ticks(f[4]);
            c.connected_at = from_ticks(f[5]);
            for (std::size_t t = 0; with_pipes && t < 2; ++t) {
                if (const uint64_t bytes = number(f[6 + t]); bytes > 0) {
                    const int read_fd = take_fd();
                    c.hold_unsent(kTowards[t], {read_fd, take_fd(), bytes});
                }
            }
            const std::error_code error = engine_.adopt(std::move(c));
            if (error) {
                // Our copy closes with `c`; the old process takes its own back.
                log_.warn("upgrade: a connection of route \"{}\" is not taken over: {}",
                          std::string(f[0]), error.message());
                ++refused;
            } else {
                ++adopted;
            }
            reply += error ? '0' : '1';
        }
        try {
            send_message(conversation_.get(), reply);
        } catch (const std::exception& e) {
            ended_by = e.what();
            break;
        }
    }
    ::shutdown(conversation_.get(), SHUT_RDWR); // the old process hears at once
    log_.info("upgrade: took over {} from process {} in {} ms{}{}", count_of(adopted, "connection"),
              static_cast<int>(old_process_), millis_since(start),
              refused > 0 ? fmt::format(" ({} refused, kept there)", refused) : std::string(),
              ended_by.empty() ? std::string()
                               : fmt::format("; the hand-over stopped: {}", ended_by));
}

} // namespace uringfwd::cli
