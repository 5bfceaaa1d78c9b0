// GoogleTest predicates for transfer results, so a failure message says what arrived
// (byte count, status, errno) rather than just "hashes differ".
#pragma once

#include "tests/support/exchange.hpp"

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

} // namespace uringfwd::test
