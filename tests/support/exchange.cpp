#include "tests/support/exchange.hpp"

#include "tests/support/payload.hpp"
#include "tests/support/sha256.hpp"
#include "tests/support/sockets.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <fmt/core.h>
#include <thread>
#include <vector>

namespace uringfwd::test {

std::string ExchangeResult::describe() const {
    using std::chrono::duration_cast;
    return fmt::format("sent={} ({}, errno {}) received={} ({}, errno {}) aborted={} "
                       "elapsed={}ms",
                       sent, to_string(send_status), send_error, received, to_string(recv_status),
                       recv_error, aborted, duration_cast<milliseconds>(elapsed).count());
}

ExchangePlan source_plan(uint64_t bytes, uint64_t seed) {
    ExchangePlan plan;
    plan.send_bytes = bytes;
    plan.send_seed = seed;
    plan.order = ExchangePlan::Order::SendFirst;
    return plan;
}

ExchangePlan paced_duplex_plan(uint64_t bytes, uint64_t seed, uint64_t read_bytes_per_sec) {
    ExchangePlan plan;
    plan.send_bytes = bytes;
    plan.send_seed = seed;
    plan.read_bytes_per_sec = read_bytes_per_sec;
    return plan;
}

ExchangePlan sink_plan(uint64_t read_bytes_per_sec) {
    ExchangePlan plan;
    plan.order = ExchangePlan::Order::ReceiveFirst;
    plan.read_bytes_per_sec = read_bytes_per_sec;
    return plan;
}

namespace {

constexpr std::size_t kSendChunk = 256 * 1024;

class Exchanger {
public:
    Exchanger(UniqueFd& fd, const ExchangePlan& plan, const Deadline& deadline)
        : fd_(fd), plan_(plan), deadline_(deadline), payload_(plan.send_seed),
          send_buf_(kSendChunk), recv_buf_(std::max<std::size_t>(plan.read_chunk, 1)),
          start_(Clock::now()), read_start_(start_ + plan.read_delay) {}

    ExchangeResult run() {
        if (plan_.send_bytes == 0 && plan_.order != ExchangePlan::Order::ReceiveFirst) {
            finish_send();
        }
        while (!done()) {
            if (!step()) {
                break;
            }
        }
        result_.received_sha256 = sha_.hex_digest();
        result_.elapsed = Clock::now() - start_;
        return result_;
    }

private:
    bool send_done() const { return result_.send_status != IoStatus::NotDone; }
    bool recv_done() const { return result_.recv_status != IoStatus::NotDone; }
    bool done() const { return send_done() && recv_done(); }

    bool may_send() const {
        if (send_done()) {
            return false;
        }
        return plan_.order != ExchangePlan::Order::ReceiveFirst || recv_done();
    }

    bool read_window_open() const {
        return plan_.order != ExchangePlan::Order::SendFirst || send_done();
    }

    // When reading may next happen, honouring read_delay and the pace limit.
    Clock::time_point next_read_time() const {
        Clock::time_point t = read_start_;
        if (plan_.read_bytes_per_sec > 0) {
            const auto allowed_at =
                read_start_ +
                std::chrono::duration_cast<Clock::duration>(
                    std::chrono::duration<double>(static_cast<double>(result_.received) /
                                                  static_cast<double>(plan_.read_bytes_per_sec)));
            t = std::max(t, allowed_at);
        }
        return t;
    }

    void finish_send() {
        result_.send_status = IoStatus::Ok;
        result_.send_finished = Clock::now() - start_;
        if (plan_.shutdown_write_after_send) {
            shutdown_write(fd_.get());
        }
    }

    void abort_now() {
        abortive_close(fd_);
        result_.aborted = true;
        if (!send_done()) {
            result_.send_status = IoStatus::NotDone;
        }
        // Both directions end here; keep NotDone for what never finished.
    }

    void fail_send(int err) {
        result_.send_error = err;
        result_.send_status = classify_errno(err);
    }

    // One poll round. Returns false when the exchange must stop (timeout, cancel, abort).
    bool step() {
        const Clock::time_point now = Clock::now();
        pollfd pfds[2] = {{fd_.get(), 0, 0}, {plan_.cancel_fd, POLLIN, 0}};
        const bool want_send = may_send();
        bool want_recv = false;
        Deadline wait = deadline_;
        if (!recv_done() && read_window_open()) {
            const Clock::time_point next = next_read_time();
            if (next <= now) {
                want_recv = true;
            } else {
                wait = wait.min(Deadline::at(next));
            }
        }
        if (want_send) {
            pfds[0].events |= POLLOUT;
        }
        if (want_recv) {
            pfds[0].events |= POLLIN;
        }
        const int nfds = plan_.cancel_fd >= 0 ? 2 : 1;
        const int n = ::poll(pfds, static_cast<nfds_t>(nfds), wait.poll_timeout_ms());
        if (n < 0 && errno != EINTR) {
            mark_unfinished(IoStatus::Error);
            return false;
        }
        if (nfds == 2 && (pfds[1].revents & POLLIN)) {
            mark_unfinished(IoStatus::Cancelled);
            return false;
        }
        if (n <= 0) {
            if (deadline_.expired()) {
                mark_unfinished(IoStatus::Timeout);
                return false;
            }
            return true; // a pacing wait ended
        }
        const short ev = pfds[0].revents;
        if (want_recv && (ev & (POLLIN | POLLHUP | POLLERR))) {
            if (!do_recv()) {
                return false;
            }
        }
        if (want_send && !send_done() && (ev & (POLLOUT | POLLERR | POLLHUP))) {
            if (!do_send()) {
                return false;
            }
        }
        if (!want_recv && !want_send && (ev & POLLHUP) && !(ev & POLLERR)) {
            // poll() reports a hangup even when not asked; while pacing, that would spin.
            std::this_thread::sleep_for(milliseconds{1});
        }
        // A peer reset seen only as POLLERR while neither side is wanted: surface it.
        if (!want_recv && !want_send && (ev & POLLERR)) {
            int err = 0;
            socklen_t len = sizeof(err);
            ::getsockopt(fd_.get(), SOL_SOCKET, SO_ERROR, &err, &len);
            if (err != 0) {
                result_.recv_error = err;
                result_.recv_status = classify_errno(err);
                if (!send_done()) {
                    fail_send(err);
                }
            }
        }
        return true;
    }

    bool do_recv() {
        std::size_t limit = recv_buf_.size();
        if (plan_.abort_after_received) {
            limit = static_cast<std::size_t>(
                std::min<uint64_t>(limit, *plan_.abort_after_received - result_.received));
        }
        const ssize_t n =
            ::recv(fd_.get(), recv_buf_.data(), std::max<std::size_t>(limit, 1), MSG_DONTWAIT);
        if (n > 0) {
            if (result_.received == 0) {
                result_.first_byte = Clock::now() - start_;
            }
            result_.received += static_cast<uint64_t>(n);
            sha_.update(std::span(recv_buf_.data(), static_cast<std::size_t>(n)));
            if (plan_.abort_after_received && result_.received >= *plan_.abort_after_received) {
                abort_now();
                return false;
            }
        } else if (n == 0) {
            result_.recv_status = IoStatus::Eof;
            if (plan_.order == ExchangePlan::Order::ReceiveFirst && plan_.send_bytes == 0 &&
                !send_done()) {
                finish_send();
            }
        } else if (errno != EAGAIN && errno != EINTR) {
            result_.recv_error = errno;
            result_.recv_status = classify_errno(errno);
            // The connection is gone: a pending send can only fail the same way.
            if (!send_done() && result_.recv_status == IoStatus::Reset) {
                fail_send(errno);
            }
        }
        return true;
    }

    bool do_send() {
        uint64_t want = std::min<uint64_t>(send_buf_.size(), plan_.send_bytes - result_.sent);
        if (plan_.abort_after_sent) {
            want = std::min<uint64_t>(want, *plan_.abort_after_sent - result_.sent);
        }
        const std::size_t len = static_cast<std::size_t>(want);
        payload_.fill(result_.sent, std::span(send_buf_.data(), len));
        const ssize_t n = ::send(fd_.get(), send_buf_.data(), len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n >= 0) {
            result_.sent += static_cast<uint64_t>(n);
            if (plan_.abort_after_sent && result_.sent >= *plan_.abort_after_sent) {
                abort_now();
                return false;
            }
            if (result_.sent == plan_.send_bytes) {
                finish_send();
            }
        } else if (errno != EAGAIN && errno != EINTR) {
            fail_send(errno);
        }
        return true;
    }

    void mark_unfinished(IoStatus status) {
        if (!send_done()) {
            result_.send_status = status;
        }
        if (!recv_done()) {
            result_.recv_status = status;
        }
    }

    UniqueFd& fd_;
    const ExchangePlan& plan_;
    const Deadline deadline_;
    const Payload payload_;
    std::vector<std::byte> send_buf_;
    std::vector<std::byte> recv_buf_;
    const Clock::time_point start_;
    const Clock::time_point read_start_;
    Sha256 sha_;
    ExchangeResult result_;
};

} // namespace

ExchangeResult exchange(UniqueFd& fd, const ExchangePlan& plan, const Deadline& deadline) {
    return Exchanger(fd, plan, deadline).run();
}

} // namespace uringfwd::test
