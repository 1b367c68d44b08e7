// 24-bit modular PSN arithmetic (IBTA §9.7.1; rxe psn_compare()).
#include <gtest/gtest.h>

#include "dataplane/wire/psn.h"

namespace urnic::wire {
namespace {

TEST(Psn, MasksTo24Bits) {
  EXPECT_EQ(Psn(0x1234567).value(), 0x234567u);
  EXPECT_EQ((Psn(0xFFFFFE) + 3).value(), 1u);
  EXPECT_EQ((Psn(1) - 3).value(), 0xFFFFFEu);
}

TEST(Psn, ModularComparisonAcrossTheWrap) {
  EXPECT_TRUE(Psn::before(Psn(0xFFFFFF), Psn(0)));
  EXPECT_TRUE(Psn::after(Psn(0), Psn(0xFFFFFF)));
  EXPECT_EQ(Psn::diff(Psn(3), Psn(0xFFFFFD)), 6);
  EXPECT_EQ(Psn::diff(Psn(0xFFFFFD), Psn(3)), -6);
  EXPECT_FALSE(Psn::before(Psn(7), Psn(7)));
  EXPECT_FALSE(Psn::after(Psn(7), Psn(7)));
}

TEST(Psn, HalfSpaceBoundary) {
  // Within 2^23 - 1 the order is well defined in both directions.
  const Psn a(100);
  EXPECT_TRUE(Psn::after(a + int32_t(Psn::kHalf - 1), a));
  EXPECT_TRUE(Psn::before(a - int32_t(Psn::kHalf - 1), a));
  // Exactly half the space apart: diff is -2^23 one way (sign extension of bit 23).
  EXPECT_EQ(Psn::diff(a + int32_t(Psn::kHalf), a), -int32_t(Psn::kHalf));
}

TEST(Psn, DiffIsAntisymmetricForAllShifts) {
  for (uint32_t base : {0u, 1u, 0x7FFFFFu, 0x800000u, 0xFFFFFFu}) {
    for (int32_t d : {1, 2, 64, 128, 1 << 20, (1 << 23) - 1}) {
      const Psn a(base), b = Psn(base) + d;
      EXPECT_EQ(Psn::diff(b, a), d) << base << " " << d;
      EXPECT_EQ(Psn::diff(a, b), -d) << base << " " << d;
    }
  }
}

TEST(Psn, IncrementWraps) {
  Psn p(0xFFFFFF);
  ++p;
  EXPECT_EQ(p, Psn(0));
  p += 5;
  EXPECT_EQ(p.value(), 5u);
}

}  // namespace
}  // namespace urnic::wire
