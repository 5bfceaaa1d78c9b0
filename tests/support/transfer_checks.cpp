#include "tests/support/transfer_checks.hpp"

#include "tests/support/payload.hpp"

namespace uringfwd::test {

::testing::AssertionResult ReceivedPayload(const ExchangeResult& r, uint64_t seed, uint64_t size) {
    if (r.recv_status != IoStatus::Eof) {
        return ::testing::AssertionFailure()
               << "expected EOF after " << size << " bytes; " << r.describe();
    }
    if (r.received != size) {
        return ::testing::AssertionFailure() << "expected " << size << " bytes; " << r.describe();
    }
    if (r.received_sha256 != payload_sha256(seed, size)) {
        return ::testing::AssertionFailure()
               << "right length, wrong content (sha256 mismatch); " << r.describe();
    }
    return ::testing::AssertionSuccess();
}

::testing::AssertionResult ReceivedPrefixOf(const ExchangeResult& r, uint64_t seed) {
    if (r.received_sha256 != payload_sha256(seed, r.received)) {
        return ::testing::AssertionFailure()
               << "the " << r.received << " bytes received are not the payload's prefix; "
               << r.describe();
    }
    return ::testing::AssertionSuccess();
}

::testing::AssertionResult SentAll(const ExchangeResult& r, uint64_t size) {
    if (r.send_status != IoStatus::Ok || r.sent != size) {
        return ::testing::AssertionFailure()
               << "expected to send " << size << " bytes; " << r.describe();
    }
    return ::testing::AssertionSuccess();
}

::testing::AssertionResult EndedByPeer(const ExchangeResult& r) {
    auto ended = [](IoStatus s) {
        return s == IoStatus::Eof || s == IoStatus::Reset || s == IoStatus::Error;
    };
    const bool timed_out = r.recv_status == IoStatus::Timeout || r.send_status == IoStatus::Timeout;
    if (!timed_out && (ended(r.recv_status) || ended(r.send_status))) {
        return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure() << "the connection did not end; " << r.describe();
}

::testing::AssertionResult BothWaysIntact(const ExchangeResult& mine, const ExchangePlan& client,
                                          ScriptedPeer& peer, const ExchangePlan& upstream,
                                          const Deadline& wait) {
    if (::testing::AssertionResult r = SentAll(mine, client.send_bytes); !r)
        return r << " (the client's send)";
    if (::testing::AssertionResult r =
            ReceivedPayload(mine, upstream.send_seed, upstream.send_bytes);
        !r)
        return r << " (what the client received)";
    const std::optional<ExchangeResult> theirs = peer.wait_result(wait);
    if (!theirs)
        return ::testing::AssertionFailure() << "the upstream peer reported no result";
    if (::testing::AssertionResult r = SentAll(*theirs, upstream.send_bytes); !r)
        return r << " (the upstream's send)";
    if (::testing::AssertionResult r =
            ReceivedPayload(*theirs, client.send_seed, client.send_bytes);
        !r)
        return r << " (what the upstream received)";
    return ::testing::AssertionSuccess();
}

} // namespace uringfwd::test
