// The op tag packed into an operation's user_data: every field comes back as it went
// in, at the edges of its bits, and the fields never spill into each other.
#include "shard/loop/op_tag.hpp"

#include <cstdint>
#include <set>

#include <gtest/gtest.h>

using namespace uringfwd::engine;

namespace {

constexpr uint32_t kMaxGeneration = OpTag::kGenerationMask;
constexpr uint32_t kMaxIndex = OpTag::kIndexMask;

Op op_at(unsigned value) {
    return static_cast<Op>(value);
}

TEST(OpTag, EveryOperationOfEveryOwnerComesBack) {
    for (unsigned v = 1; v < static_cast<unsigned>(Op::Count); ++v) {
        for (OpTag in : {OpTag::for_shard(op_at(v)), OpTag::for_listener(op_at(v), 7),
                         OpTag::for_connection(op_at(v), 12, 34, Side::ToClient)}) {
            EXPECT_EQ(OpTag::decode(in.encode()), in) << "op " << v;
        }
    }
}

TEST(OpTag, ConnectionFieldsComeBackAtTheEdgesOfTheirBits) {
    for (uint32_t slot : {0u, 1u, 0xffffu, kMaxIndex - 1, kMaxIndex}) {
        for (uint32_t generation : {0u, 1u, kMaxGeneration - 1, kMaxGeneration}) {
            for (Side side : kBothSides) {
                OpTag in = OpTag::for_connection(Op::SpliceOut, slot, generation, side);
                OpTag out = OpTag::decode(in.encode());
                EXPECT_EQ(out, in) << slot << " " << generation;
                EXPECT_EQ(out.owner, Owner::Connection);
            }
        }
    }
}

TEST(OpTag, AListenersIndexIsItsOwnFieldNotTheGeneration) {
    OpTag out = OpTag::decode(OpTag::for_listener(Op::Accept, 300).encode());
    EXPECT_EQ(out.owner, Owner::Listener);
    EXPECT_EQ(out.index, 300u);
    EXPECT_EQ(out.generation, 0u);
    EXPECT_EQ(OpTag::decode(OpTag::for_listener(Op::Accept, kMaxIndex).encode()).index, kMaxIndex);
}

TEST(OpTag, TheOwnerKindTellsApartTagsWithTheSameIndex) {
    // The shard's tags have index 0, as do connection 0's and listener 0's: the owner
    // kind alone names whose in-flight count a completion settles.
    std::set<uint64_t> values = {OpTag::for_shard(Op::Cancel).encode(),
                                 OpTag::for_listener(Op::Cancel, 0).encode(),
                                 OpTag::for_connection(Op::Cancel, 0, 0).encode()};
    EXPECT_EQ(values.size(), 3u);
}

TEST(OpTag, AGenerationPastItsBitsWrapsAndLeavesTheSlotAlone) {
    OpTag out = OpTag::decode(OpTag::for_connection(Op::PollIn, 5, kMaxGeneration + 2).encode());
    EXPECT_EQ(out.generation, 1u);
    EXPECT_EQ(out.index, 5u);
    EXPECT_EQ(out.op, Op::PollIn);
}

TEST(OpTag, NoEncodedTagIsZero) {
    // The operations start at 1, so a user_data of 0 is never one of ours.
    EXPECT_NE(OpTag::for_shard(Op::Wake).encode(), 0u);
}

TEST(OpTag, EncodingIsAConstantExpression) {
    // Allocation-free and usable at compile time: a cancel's target tag costs nothing.
    constexpr uint64_t v = OpTag::for_connection(Op::Recv, 3, 4, Side::ToClient).encode();
    static_assert(OpTag::decode(v).index == 3 && OpTag::decode(v).generation == 4);
    EXPECT_EQ(OpTag::decode(v).side, Side::ToClient);
}

} // namespace
