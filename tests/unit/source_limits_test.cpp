// SourceTable with an injected clock: open counts, the token bucket, grouping by
// prefix, the bound on entries and evictions.
#include "routing/source_limits.hpp"
#include "tests/unit/address_text.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace uringfwd::engine {
namespace {

using namespace std::chrono_literals;
using Verdict = SourceTable::Verdict;

SourceKey key(const char* text, const SourceRule& rule, uint64_t route = 1) {
    return source_key(route, address_of(text), rule).value();
}

const SourceTable::Clock::time_point t0{};

TEST(SourceTable, HoldsAtMostMaxOpenAndAFreedSlotAdmitsAgain) {
    SourceTable table(64, 7);
    SourceRule rule{.max_open = 5};
    std::vector<SourceTable::Hold> holds;
    for (int i = 0; i < 5; ++i) {
        auto r = table.admit(key("127.0.0.2", rule), rule, t0);
        ASSERT_EQ(r.verdict, Verdict::Admitted);
        holds.push_back(r.hold);
    }
    EXPECT_EQ(table.admit(key("127.0.0.2", rule), rule, t0).verdict, Verdict::OverOpen);
    EXPECT_EQ(table.admit(key("127.0.0.3", rule), rule, t0).verdict, Verdict::Admitted);
    table.release(holds[0]);
    EXPECT_FALSE(holds[0].held());
    table.release(holds[0]); // cleared: a second release gives nothing back
    auto again = table.admit(key("127.0.0.2", rule), rule, t0);
    EXPECT_EQ(again.verdict, Verdict::Admitted);
    EXPECT_EQ(table.admit(key("127.0.0.2", rule), rule, t0).verdict, Verdict::OverOpen);
}

TEST(SourceTable, RateAdmitsBurstThenRate) {
    SourceTable table(64, 7);
    SourceRule rule{.rate = 10, .burst = 5};
    int admitted = 0;
    // 3 s in steps of 10 ms, 4 attempts a step: far more than the rate.
    for (int step = 0; step <= 300; ++step)
        for (int i = 0; i < 4; ++i)
            admitted += table.admit(key("10.0.0.1", rule), rule, t0 + step * 10ms).verdict ==
                        Verdict::Admitted;
    EXPECT_EQ(admitted, 5 + 30);
}

TEST(SourceTable, GroupsByPrefix) {
    SourceTable table(64, 7);
    SourceRule rule{.max_open = 1, .prefix_v4 = 24, .prefix_v6 = 64};
    EXPECT_EQ(table.admit(key("10.1.2.3", rule), rule, t0).verdict, Verdict::Admitted);
    EXPECT_EQ(table.admit(key("10.1.2.200", rule), rule, t0).verdict, Verdict::OverOpen);
    EXPECT_EQ(table.admit(key("10.1.3.1", rule), rule, t0).verdict, Verdict::Admitted);
    EXPECT_EQ(table.admit(key("2001:db8::1", rule), rule, t0).verdict, Verdict::Admitted);
    EXPECT_EQ(table.admit(key("2001:db8::ffff:1", rule), rule, t0).verdict, Verdict::OverOpen);
    // A mapped address is its IPv4 address; another route is another key.
    EXPECT_EQ(table.admit(key("::ffff:10.1.2.9", rule), rule, t0).verdict, Verdict::OverOpen);
    EXPECT_EQ(table.admit(key("10.1.2.3", rule, 2), rule, t0).verdict, Verdict::Admitted);
}

TEST(SourceTable, AFloodOfSourcesStaysWithinTheBoundAndEvicts) {
    SourceTable table(1024, 7);
    SourceRule rule{.rate = 1, .burst = 5}; // an entry expires only after 1 s
    for (uint32_t i = 0; i < 100000; ++i) {
        sockaddr_storage s{};
        auto& v4 = reinterpret_cast<sockaddr_in&>(s);
        v4.sin_family = AF_INET;
        v4.sin_addr.s_addr = htonl(0x7f000000u | (i + 1));
        auto k = source_key(1, s, rule).value();
        EXPECT_EQ(table.admit(k, rule, t0 + std::chrono::microseconds(i)).verdict,
                  Verdict::Admitted);
    }
    EXPECT_EQ(table.capacity(), 1024u);
    EXPECT_LE(table.tracked(t0 + 100ms), table.capacity());
    EXPECT_GE(table.evictions(), 100000u - 1024u);
    EXPECT_EQ(table.tracked(t0 + 10s), 0u); // every bucket full again: all expired
}

TEST(SourceTable, EntriesHoldingConnectionsAreNeverEvicted) {
    SourceTable table(8, 7); // one bucket
    SourceRule rule{.max_open = 1};
    for (int i = 0; i < 8; ++i) {
        std::string a = "10.0.0." + std::to_string(i + 1);
        ASSERT_EQ(table.admit(key(a.c_str(), rule), rule, t0).verdict, Verdict::Admitted);
    }
    EXPECT_EQ(table.admit(key("10.0.0.100", rule), rule, t0).verdict, Verdict::Untracked);
    EXPECT_EQ(table.untracked(), 1u);
    EXPECT_EQ(table.evictions(), 0u);
    EXPECT_EQ(table.admit(key("10.0.0.1", rule), rule, t0).verdict, Verdict::OverOpen);
}

TEST(SourceTable, ShardsTogetherHoldExactlyMaxOpen) {
    // Two threads (two shards' accept paths) race on one source: 5 held in total.
    SourceTable table(64, 7);
    SourceRule rule{.max_open = 5};
    std::atomic<int> admitted{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t)
        threads.emplace_back([&] {
            for (int i = 0; i < 1000; ++i)
                admitted +=
                    table.admit(key("127.0.0.2", rule), rule, t0).verdict == Verdict::Admitted;
        });
    for (std::thread& t : threads)
        t.join();
    EXPECT_EQ(admitted.load(), 5);
}

TEST(SourceKey, UnixPeerHasNone) {
    sockaddr_storage s{};
    s.ss_family = AF_UNIX;
    EXPECT_FALSE(source_key(1, s, SourceRule{.max_open = 1}).has_value());
}

} // namespace
} // namespace uringfwd::engine
