// A shard's one way in from other threads (Seastar's submit_to, helio's
// DispatchBrief/Await): any thread posts a task, or awaits one and its result; the
// shard runs them on its own thread, in the order posted, when its wake-up (the
// doorbell, an eventfd) fires. Closed when the shard ends: a task posted then is
// refused, one queued and not run is dropped (what it captured is destroyed: a
// hand-over's sockets are reset), and an await() that waits for it returns empty.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

namespace uringfwd::engine {

class Mailbox {
public:
    // `wake`: makes the owner call run() soon (rings its doorbell); called on the
    // posting thread, outside the lock.
    explicit Mailbox(std::function<void()> wake) : wake_(std::move(wake)) {}
    ~Mailbox() { close(); }
    Mailbox(const Mailbox&) = delete;
    Mailbox& operator=(const Mailbox&) = delete;

    // Any thread: queues `task` (a callable taking nothing) for the owner's thread.
    // False once closed, with `task` left as it was (not moved from), so the caller
    // still has what it captured.
    template <typename F> bool post(F&& task) {
        {
            std::lock_guard lock(mu_);
            if (closed_)
                return false;
            queue_.push_back(
                Entry{std::make_unique<Task<std::decay_t<F>>>(std::forward<F>(task)), nullptr});
        }
        wake_();
        return true;
    }

    // Any thread but the owner's: runs `task` on the owner's thread and returns once it
    // has run: its result (std::optional), or true for a task returning nothing. Empty
    // (false) when the mailbox was closed before the task ran.
    template <typename F> auto await(F&& task) {
        using R = std::invoke_result_t<F&>;
        using Result = std::conditional_t<std::is_void_v<R>, bool, std::optional<R>>;
        Result result{};
        auto run = [&task, &result] {
            if constexpr (std::is_void_v<R>) {
                task();
                result = true;
            } else {
                result.emplace(task());
            }
        };
        bool done = false;
        {
            std::unique_lock lock(mu_);
            if (closed_)
                return result;
            queue_.push_back(Entry{std::make_unique<Task<decltype(run)>>(std::move(run)), &done});
        }
        wake_();
        std::unique_lock lock(mu_);
        answered_.wait(lock, [&] { return done; });
        return result;
    }

    // The owner's thread: runs every task queued so far; those posted meanwhile wait
    // for the next call (their post woke the owner again).
    void run() {
        std::vector<Entry> taken;
        {
            std::lock_guard lock(mu_);
            taken.swap(queue_);
        }
        for (Entry& entry : taken) {
            entry.task->run();
            if (entry.done != nullptr) {
                std::lock_guard lock(mu_);
                *entry.done = true;
                answered_.notify_all();
            }
        }
    }

    // The owner's thread, or any once the owner has ended: refuses what comes next and
    // drops what is queued (see above). Idempotent.
    void close() {
        std::vector<Entry> dropped;
        {
            std::lock_guard lock(mu_);
            closed_ = true;
            dropped.swap(queue_);
            for (Entry& entry : dropped)
                if (entry.done != nullptr)
                    *entry.done = true; // its await() returns empty
            answered_.notify_all();
        }
        // Destroyed here, outside the lock: what the tasks captured goes with them.
    }

    bool closed() const {
        std::lock_guard lock(mu_);
        return closed_;
    }

private:
    // A task of any callable type, which may be move-only (std::function is not).
    struct AnyTask {
        virtual ~AnyTask() = default;
        virtual void run() = 0;
    };
    template <typename F> struct Task final : AnyTask {
        template <typename G> explicit Task(G&& g) : f(std::forward<G>(g)) {}
        void run() override { f(); }
        F f;
    };
    struct Entry {
        std::unique_ptr<AnyTask> task;
        bool* done; // an await()'s, set under mu_ once it ran or was dropped
    };

    std::function<void()> wake_;
    mutable std::mutex mu_;
    std::condition_variable answered_;
    std::vector<Entry> queue_;
    bool closed_ = false;
};

} // namespace uringfwd::engine
