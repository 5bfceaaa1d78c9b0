// A shard's mailbox (engine/shard/loop/mailbox.hpp): tasks posted or awaited from other
// threads run on the owner's, in order, after a wake-up; await() returns the task's
// result; once closed, posts are refused with the task left to the caller, queued
// tasks are dropped unrun, and an await() waiting for one returns empty.
#include "shard/loop/mailbox.hpp"

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

using namespace uringfwd::engine;
using namespace std::chrono_literals;

namespace {

// The owner: a thread that runs the mailbox whenever it was woken, until told to end.
class Owner {
public:
    Owner() : mailbox_([this] { woken_.fetch_add(1); }) {}
    ~Owner() { end(); }
    Mailbox& mailbox() { return mailbox_; }
    int wakes() const { return woken_.load(); }
    std::thread::id id() const { return thread_.get_id(); }
    void start() {
        thread_ = std::thread([this] {
            int seen = 0;
            while (!ending_.load()) {
                if (int now = woken_.load(); now != seen) {
                    seen = now;
                    mailbox_.run();
                }
                std::this_thread::sleep_for(1ms);
            }
        });
    }
    void end() {
        ending_ = true;
        if (thread_.joinable())
            thread_.join();
    }

private:
    std::atomic<int> woken_{0};
    std::atomic<bool> ending_{false};
    Mailbox mailbox_;
    std::thread thread_;
};

TEST(Mailbox, PostedTasksRunOnTheOwnersThreadInOrderAfterAWakeUp) {
    Owner owner;
    std::vector<int> order;
    std::vector<std::thread::id> ran_on;
    for (int i = 0; i < 3; ++i)
        ASSERT_TRUE(owner.mailbox().post([&, i] {
            order.push_back(i);
            ran_on.push_back(std::this_thread::get_id());
        }));
    EXPECT_EQ(owner.wakes(), 3);
    EXPECT_TRUE(order.empty()) << "ran before the owner did";
    owner.start();
    bool last = owner.mailbox().await([&] { return order.size(); }) == std::optional<size_t>(3);
    EXPECT_TRUE(last);
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
    for (std::thread::id id : ran_on)
        EXPECT_EQ(id, owner.id());
}

TEST(Mailbox, AwaitReturnsTheResultOnceTheTaskHasRun) {
    Owner owner;
    owner.start();
    std::optional<std::string> answer =
        owner.mailbox().await([] { return std::string("from the owner"); });
    EXPECT_EQ(answer, "from the owner");
    int calls = 0;
    EXPECT_TRUE(owner.mailbox().await([&] { ++calls; })); // a task returning nothing
    EXPECT_EQ(calls, 1);
}

TEST(Mailbox, ManyThreadsAwaitAtOnce) {
    Owner owner;
    owner.start();
    int total = 0; // the owner's alone: no lock
    std::vector<std::thread> threads;
    std::atomic<int> answered{0};
    for (int t = 0; t < 8; ++t)
        threads.emplace_back([&] {
            for (int i = 0; i < 50; ++i)
                if (owner.mailbox().await([&] { return ++total; }))
                    ++answered;
        });
    for (std::thread& t : threads)
        t.join();
    EXPECT_EQ(answered.load(), 400);
    EXPECT_EQ(owner.mailbox().await([&] { return total; }), 400);
}

TEST(Mailbox, AMoveOnlyTaskIsDroppedUnrunWhenTheMailboxCloses) {
    Owner owner; // never started: nothing runs
    auto kept = std::make_shared<int>(7);
    std::weak_ptr<int> watch = kept;
    ASSERT_TRUE(owner.mailbox().post([held = std::make_unique<std::shared_ptr<int>>(
                                          std::move(kept))] { FAIL() << "ran after close"; }));
    EXPECT_FALSE(watch.expired()) << "the queued task holds what it captured";
    owner.mailbox().close();
    EXPECT_TRUE(watch.expired()) << "close() destroys the task and what it captured";
    EXPECT_TRUE(owner.mailbox().closed());
}

TEST(Mailbox, AfterCloseAPostIsRefusedAndTheCallerKeepsTheTask) {
    Owner owner;
    owner.mailbox().close();
    struct Task {
        std::unique_ptr<int> payload;
        void operator()() {}
    };
    Task task{std::make_unique<int>(42)};
    int wakes = owner.wakes();
    EXPECT_FALSE(owner.mailbox().post(std::move(task)));
    ASSERT_NE(task.payload, nullptr) << "a refused task was moved from";
    EXPECT_EQ(*task.payload, 42);
    EXPECT_EQ(owner.wakes(), wakes) << "a refused post woke the owner";
    EXPECT_EQ(owner.mailbox().await([] { return 1; }), std::nullopt);
    EXPECT_FALSE(owner.mailbox().await([] {}));
}

TEST(Mailbox, AnAwaitWaitingWhenTheMailboxClosesReturnsEmpty) {
    Owner owner; // never runs the task
    std::atomic<bool> returned{false};
    std::optional<int> answer = 0;
    std::thread waiter([&] {
        answer = owner.mailbox().await([] { return 5; });
        returned = true;
    });
    while (owner.wakes() == 0) // posted
        std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(20ms);
    EXPECT_FALSE(returned.load()) << "await() returned before its task ran";
    owner.mailbox().close();
    waiter.join();
    EXPECT_EQ(answer, std::nullopt);
}

} // namespace
