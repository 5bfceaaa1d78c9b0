// What size the pool asks for after the kernel refuses one.
#include "pipes/size_policy.hpp"

#include <gtest/gtest.h>

using uringfwd::pipes::SizePolicy;

TEST(SizePolicy, StartsAtTheWantedSize) {
    SizePolicy p(1 << 20);
    EXPECT_EQ(p.wanted(), 1u << 20);
    EXPECT_EQ(p.reductions(), 0u);
}

TEST(SizePolicy, NeverAsksForLessThanTheKernelDefault) {
    SizePolicy p(4096);
    EXPECT_EQ(p.wanted(), SizePolicy::kFloor);
}

TEST(SizePolicy, HalvesOnEachRefusalDownToTheFloor) {
    SizePolicy p(1 << 20);
    EXPECT_TRUE(p.refused(1 << 20));
    EXPECT_EQ(p.wanted(), 512u * 1024);
    EXPECT_TRUE(p.refused(512 * 1024));
    EXPECT_TRUE(p.refused(256 * 1024));
    EXPECT_TRUE(p.refused(128 * 1024));
    EXPECT_EQ(p.wanted(), SizePolicy::kFloor);
    EXPECT_EQ(p.reductions(), 4u);
    EXPECT_FALSE(p.refused(SizePolicy::kFloor)); // nothing smaller worth asking for
    EXPECT_EQ(p.wanted(), SizePolicy::kFloor);
}

TEST(SizePolicy, AStaleRefusalDoesNotShrinkTwice) {
    SizePolicy p(1 << 20);
    EXPECT_TRUE(p.refused(1 << 20)); // now 512 KiB
    // Another pipe was refused 1 MiB before it learnt about the reduction.
    EXPECT_TRUE(p.refused(1 << 20));
    EXPECT_EQ(p.wanted(), 512u * 1024);
    EXPECT_EQ(p.reductions(), 1u);
}
