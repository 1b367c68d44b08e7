// The DCQCN reaction point (dataplane/dcqcn.h) against rate and alpha sequences computed by hand
// from the formulas in urnic/congestion.h (ConnectX's parameters; Zhu et al., SIGCOMM 2015).
// The clock is 1 tick = 1 ns (tsc_hz 1e9), so 1 us = 1000 ticks.
#include "dataplane/dcqcn.h"

#include <gtest/gtest.h>

#include <cmath>

namespace urnic::dp {
namespace {

constexpr uint64_t kHz = 1'000'000'000;
constexpr uint64_t kUs = 1000;

// Defaults except: a 1000 Mb/s maximum, no byte counter unless a test sets one.
Dcqcn make(DcqcnConfig c = {}, uint32_t max_mbps = 1000) {
  Dcqcn d;
  d.init(c, max_mbps, kHz);
  return d;
}

TEST(Dcqcn, StartsUnlimitedAtTheMaximum) {
  Dcqcn d = make();
  EXPECT_FALSE(d.limited());
  EXPECT_DOUBLE_EQ(d.rate_mbps(), 1000);
  EXPECT_TRUE(d.may_send(0));
  d.advance(10'000 * kUs);  // no CNP: nothing changes, alpha keeps its initial value
  EXPECT_FALSE(d.limited());
  EXPECT_DOUBLE_EQ(d.alpha(), 1023.0 / 1024);
}

TEST(Dcqcn, FirstCnpCutsByAlphaOverTwo) {
  Dcqcn d = make();
  d.on_cnp(100 * kUs);
  // rate * (1 - alpha * 1024 / 2^11) with alpha = 1023/1024: 1000 * (1 - 1023/2048).
  EXPECT_DOUBLE_EQ(d.rate_mbps(), 1000 * (1 - 1023.0 / 2048));
  EXPECT_DOUBLE_EQ(d.target_mbps(), 1000);  // RT = RC before the cut
  EXPECT_TRUE(d.limited());
  EXPECT_EQ(d.counters().cnps_handled, 1u);
}

TEST(Dcqcn, AlphaFollowsConnectXUpdate) {
  DcqcnConfig c;
  c.time_reset_us = 1'000'000;  // keep increases out of the way
  Dcqcn d = make(c);
  const double a0 = 1023.0 / 1024, w = 1019.0 / 1024, gain = 5.0 / 1024;
  d.on_cnp(10 * kUs);  // alpha timer starts: first update at 11 us, with the CNP counted
  d.advance(11 * kUs);
  const double a1 = w * a0 + gain;
  EXPECT_NEAR(d.alpha(), a1, 1e-12);
  d.advance(12 * kUs);  // a period with no CNP: decay only
  EXPECT_NEAR(d.alpha(), w * a1, 1e-12);
  d.advance(22 * kUs);  // ten more periods at once
  EXPECT_NEAR(d.alpha(), std::pow(w, 11) * a1, 1e-12);
}

TEST(Dcqcn, CnpsWithinTheMonitorPeriodCutOnce) {
  Dcqcn d = make();
  d.on_cnp(100 * kUs);
  const double r1 = d.rate_mbps();
  d.on_cnp(100 * kUs + 3 * kUs);  // within rate_reduce_monitor_period (4 us)
  EXPECT_DOUBLE_EQ(d.rate_mbps(), r1);
  EXPECT_EQ(d.counters().cnps_handled, 1u);
  // 4 us after the first cut a CNP cuts again, with alpha updated at 101 us (the CNP at 100 us
  // counted), decayed at 102 and 103 us, and updated at 104 us with the CNP of 103 us counted.
  d.on_cnp(104 * kUs);
  const double w = 1019.0 / 1024, g = 5.0 / 1024;
  const double a = w * (w * w * (w * (1023.0 / 1024) + g)) + g;
  EXPECT_NEAR(d.alpha(), a, 1e-12);
  EXPECT_EQ(d.counters().cnps_handled, 2u);
  // No increase since the last cut: the target is not clamped and stays at 1000.
  EXPECT_DOUBLE_EQ(d.target_mbps(), 1000);
  EXPECT_NEAR(d.rate_mbps(), r1 * (1 - a * 1024 / 2048), 1e-9);
}

TEST(Dcqcn, TimerIncreasesAdditiveThenHyper) {
  DcqcnConfig c;
  c.byte_reset = 0;  // timer only: the byte counter stays 0, so hyper never comes
  Dcqcn d = make(c);
  d.on_cnp(0 + 1);
  const double r0 = 1000 * (1 - 1023.0 / 2048);
  ASSERT_DOUBLE_EQ(d.rate_mbps(), r0);
  // threshold 1: the first timer stage (T = 1) is already additive: RT = min(1000 + 5, 1000).
  d.advance(1 + 300 * kUs);
  EXPECT_EQ(d.time_stage(), 1u);
  EXPECT_DOUBLE_EQ(d.target_mbps(), 1000);
  EXPECT_DOUBLE_EQ(d.rate_mbps(), (1000 + r0) / 2);
  d.advance(1 + 600 * kUs);
  EXPECT_DOUBLE_EQ(d.rate_mbps(), (1000 + (1000 + r0) / 2) / 2);
}

TEST(Dcqcn, FastRecoveryBelowThresholdKeepsTarget) {
  DcqcnConfig c;
  c.threshold = 5;  // the paper's F
  c.byte_reset = 0;
  c.max_rate_mbps = 0;
  Dcqcn d = make(c, 40'000);
  d.on_cnp(1);
  double rc = 40'000 * (1 - 1023.0 / 2048);
  for (int i = 1; i <= 4; ++i) {  // four fast-recovery steps: RT stays, RC halves the gap
    d.advance(1 + i * 300 * kUs);
    rc = (40'000 + rc) / 2;
    EXPECT_DOUBLE_EQ(d.rate_mbps(), rc) << i;
    EXPECT_DOUBLE_EQ(d.target_mbps(), 40'000) << i;
  }
}

TEST(Dcqcn, SecondCutAfterAnIncreaseClampsTheTarget) {
  DcqcnConfig c;
  c.byte_reset = 0;
  Dcqcn d = make(c);
  d.on_cnp(1);
  d.advance(1 + 300 * kUs);  // one timer increase
  const double before = d.rate_mbps();
  d.on_cnp(1 + 301 * kUs);
  EXPECT_DOUBLE_EQ(d.target_mbps(), before);  // clamp_target_after_time
  EXPECT_EQ(d.time_stage(), 0u);
}

TEST(Dcqcn, ByteCounterAndHyperIncrease) {
  DcqcnConfig c;
  c.byte_reset = 1000;
  c.time_reset_us = 100;
  Dcqcn d = make(c);
  d.on_cnp(1);
  double rc = 1000 * (1 - 1023.0 / 2048);
  d.advance(1 + 100 * kUs);  // T = 1: additive, RT capped at 1000
  rc = (1000 + rc) / 2;
  ASSERT_NEAR(d.rate_mbps(), rc, 1e-9);
  // A second cut after a timer increase clamps RT to the rate before the cut.
  d.on_cnp(150 * kUs);
  double rt = rc;
  rc = rc * (1 - d.alpha() / 2);
  ASSERT_NEAR(d.target_mbps(), rt, 1e-9);
  ASSERT_NEAR(d.rate_mbps(), rc, 1e-9);
  d.advance(150 * kUs + 200 * kUs);  // T = 1, 2 (BC = 0): additive twice
  for (int i = 0; i < 2; ++i) rc = ((rt += 5) + rc) / 2;
  ASSERT_NEAR(d.rate_mbps(), rc, 1e-9);
  d.on_sent(1000, 350 * kUs);  // BC = 1: min(T, BC) = 1 is not above F = 1: additive
  rc = ((rt += 5) + rc) / 2;
  EXPECT_EQ(d.byte_stage(), 1u);
  EXPECT_NEAR(d.target_mbps(), rt, 1e-9);
  EXPECT_NEAR(d.rate_mbps(), rc, 1e-9);
  d.on_sent(1000, 350 * kUs);  // BC = 2, T = 2: both above F: hyper, RT += 50
  rc = ((rt += 50) + rc) / 2;
  EXPECT_EQ(d.byte_stage(), 2u);
  EXPECT_NEAR(d.target_mbps(), rt, 1e-9);
  EXPECT_NEAR(d.rate_mbps(), rc, 1e-9);
}

TEST(Dcqcn, ReturnsToUnlimitedAndNeverBelowMinimum) {
  DcqcnConfig c;
  c.min_rate_mbps = 100;
  c.min_dec_fac = 1;  // allow deep cuts
  c.gd = 10;          // rate * (1 - alpha): nearly to zero
  c.reduce_period_us = 0;
  Dcqcn d = make(c);
  for (int i = 0; i < 20; ++i) d.on_cnp(1 + i);
  EXPECT_DOUBLE_EQ(d.rate_mbps(), 100);
  d.advance(1 + 1'000'000 * kUs);  // a second without CNPs: back at the maximum
  EXPECT_FALSE(d.limited());
  EXPECT_DOUBLE_EQ(d.rate_mbps(), 1000);
}

TEST(Dcqcn, PacerSpacesFramesAtTheRate) {
  DcqcnConfig c;
  c.byte_reset = 0;
  c.time_reset_us = 1'000'000;
  c.first_cnp_rate_mbps = 80;  // 80 Mb/s: 10 bytes per us, 100 ns per byte
  Dcqcn d = make(c);
  d.on_cnp(1);
  ASSERT_DOUBLE_EQ(d.rate_mbps(), 80);
  uint64_t now = 1'000'000;
  // The idle QP banked 8 KiB of credit: 8 frames of 1000 bytes go at once, then one per 100 us.
  int sent = 0;
  while (d.may_send(now)) {
    d.on_sent(1000, now);
    ++sent;
  }
  EXPECT_EQ(sent, 9);  // the credit (8192 bytes) covers 8 frames and the 9th starts within it
  const uint64_t slot = d.next_tx();
  EXPECT_FALSE(d.may_send(slot - 1));
  EXPECT_TRUE(d.may_send(slot));
  d.on_sent(1000, slot);
  EXPECT_NEAR(static_cast<double>(d.next_tx() - slot), 100'000, 2);  // 1000 B at 80 Mb/s
}

}  // namespace
}  // namespace urnic::dp
