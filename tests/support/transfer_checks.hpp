// GoogleTest predicates for transfer results, so a failure message says what arrived
// (byte count, status, errno) rather than just "hashes differ".
#pragma once

#include "tests/support/exchange.hpp"
#include "tests/support/scripted_peer.hpp"

#include <gtest/gtest.h>

#include <cstdint>

namespace uringfwd::test {

// Exactly Payload(seed)'s first `size` bytes arrived, then EOF.
::testing::AssertionResult ReceivedPayload(const ExchangeResult& r, uint64_t seed, uint64_t size);

// Whatever arrived (possibly nothing) is an intact prefix of Payload(seed): a broken
// connection may cut a stream short but must never corrupt it.
::testing::AssertionResult ReceivedPrefixOf(const ExchangeResult& r, uint64_t seed);

// All `size` bytes were sent and the write side shut down.
::testing::AssertionResult SentAll(const ExchangeResult& r, uint64_t size);

// The exchange ended because the connection went away (EOF, reset or error on either
// direction), not because the deadline passed.
::testing::AssertionResult EndedByPeer(const ExchangeResult& r);

// Both ends of one exchange through the proxy: the client ran `client` and got `mine`;
// `peer` ran `upstream` and reports within `wait`. Each side sent all its bytes and
// received exactly the other's payload, then EOF (one stream each way, at once or in
// turn, as the plans' orders say).
::testing::AssertionResult BothWaysIntact(const ExchangeResult& mine, const ExchangePlan& client,
                                          ScriptedPeer& peer, const ExchangePlan& upstream,
                                          const Deadline& wait = Deadline{
                                              std::chrono::seconds{10}});

} // namespace uringfwd::test
